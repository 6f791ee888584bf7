"""Quoting a document: the one or two sentences of a passage that answer the question, in the
document's own words, so that no model has to write (and cannot invent a figure).

A passage is cut into answer units: a sentence, a lead-in that ends with a colon together
with the list items that complete it ("Refer people ... if they: - are aged 40 and over ..."),
or a table row under its header row and the table's caption (a caption alone answers
nothing). A row is told from the other rows by the question's words in its cells, or by the
band its label gives ("60 to 69") holding a number of the question ("a 65-year-old";
guardrag.core.bands). Each unit is scored against the question by the embedder and by the
question's words it holds; the best unit is quoted, with its neighbour when that scores nearly
as well.

A quote is served only when it could stand as an answer on its own (`quote_problem`): no line
longer than a sentence runs (a table flattened into one line by a PDF has no sentence to cut
at), and it holds the question's key words (those the KB uses at all) or is semantically very
close to it, on the scale of the evidence rerank asks of passages before any model is trusted
with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from guardrag.core.bands import row_keyed_by
from guardrag.core.embedder import Encoder
from guardrag.core.kb.blocks import is_caption
from guardrag.core.text import coverage

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[•])")
_ITEM = re.compile(r"^\s*(?:[-•*–·▪]|\(?[a-z0-9]{1,3}[.)])\s+")
#: Cells of a table row as the HTML and Word readers join them.
CELL = " | "
#: A neighbouring unit is quoted too when its score is within this of the best one's.
NEIGHBOUR = 0.05
#: Units quoted at most.
MOST_UNITS = 2
#: Words of one line of a quote at most: a longer line is no sentence (a flattened table).
QUOTE_LINE_WORDS = 60
#: Words of a quote at most (a recommendation with its list may be long; a chunk is longer).
QUOTE_MAX_WORDS = 110


@dataclass(frozen=True)
class Quote:
    """The quoted text, which units of the passage it is, and how well the best one scored."""

    text: str
    units: tuple[int, ...]
    similarity: float
    coverage: float
    #: A table row whose label's band holds a number of the question ("60 to 69": aged 65).
    keyed: bool = False


def own_text(unit: str) -> str:
    """A unit's own text: of a table row, its own cells (every row shares caption and header)."""
    return unit.splitlines()[-1] if CELL in unit else unit


def answer_units(text: str) -> list[str]:
    """The passage as sentences, each colon lead-in joined with the list items after it, and
    each table row under its table's caption and header row."""
    units: list[str] = []
    open_list = False
    header = ""  # the header row of the table being read (under its caption)
    caption = False  # the last unit is a line that could be the caption of a table below it
    for line in (line.strip() for line in text.splitlines()):
        if not line:
            open_list, header, caption = False, "", False
            continue
        if CELL in line:  # a table row: the first is the header, the others quoted under it
            if header:
                units.append(f"{header}\n{line}")
            else:
                header = f"{units.pop()}\n{line}" if caption else line
            open_list = caption = False
            continue
        header = ""
        caption = is_caption(line) and not _ITEM.match(line)
        if _ITEM.match(line) and units and open_list:
            units[-1] = f"{units[-1]}\n{line}"
            continue
        sentences = [s.strip() for s in _SENTENCE_END.split(line) if s.strip()]
        if _ITEM.match(line) and units:  # an item with no lead-in: its own unit
            sentences = [line]
        units.extend(sentences)
        open_list = bool(units) and units[-1].rstrip().endswith(":")
    return units


def best_quote(question: str, passage: str, encoder: Encoder, heading: str = "") -> Quote | None:
    """The units of `passage` that answer `question` best, in the passage's order; None for a
    passage with no text."""
    units = answer_units(passage)
    if not units:
        return None
    context = f"{heading}: " if heading else ""
    vectors = encoder.embed([question, *(context + u for u in units)])
    similarity = vectors[1:] @ vectors[0]
    # a table row is told from the other rows by its own cells, not the caption and header
    # every row shares, or by the band its label gives for a number of the question
    covered = np.array([coverage(question, own_text(u)) for u in units])
    keyed = np.array(
        [CELL in u and row_keyed_by(question, own_text(u).split(CELL)[0]) for u in units]
    )
    score = similarity + 0.25 * covered + 0.25 * keyed
    best = int(np.argmax(score))
    chosen = {best}
    for neighbour in (best - 1, best + 1):
        close = 0 <= neighbour < len(units) and score[neighbour] >= score[best] - NEIGHBOUR
        close = close and CELL not in units[best]  # a table row is quoted alone, under its header
        if close and len(chosen) < MOST_UNITS:
            chosen.add(neighbour)
    # a list item never stands without its lead-in, a lead-in never without its items
    order = tuple(sorted(chosen))
    text = " ".join(units[i] for i in order)
    return Quote(text, order, float(similarity[best]), float(covered[best]), bool(keyed[best]))


def quote_problem(
    quote: Quote, covered: float, min_coverage: float, strong_semantic: float | None
) -> str | None:
    """Why `quote` cannot be served as the answer, or None. `covered` is the share of the
    question's (IDF-weighted) words the quote holds; `strong_semantic` the similarity that
    stands in for them (None: nothing does)."""
    lines = [line.split() for line in quote.text.splitlines()]
    longest = max((len(words) for words in lines), default=0)
    if longest > QUOTE_LINE_WORDS:
        return f"no sentence to quote: a line of {longest} words > {QUOTE_LINE_WORDS}"
    if CELL in quote.text and quote.coverage < min_coverage and not quote.keyed:
        return (
            f"the table row holds too few of the question's terms to be told from the other "
            f"rows: coverage {quote.coverage:.2f} < {min_coverage}"
        )
    total = sum(len(words) for words in lines)
    if total > QUOTE_MAX_WORDS:
        return f"quote of {total} words > {QUOTE_MAX_WORDS}"
    # strong_semantic None: closeness in meaning cannot stand in for the key terms
    close = strong_semantic is not None and quote.similarity >= strong_semantic
    if covered < min_coverage and not close:
        also = (
            f" and similarity {quote.similarity:.2f} < {strong_semantic}"
            if strong_semantic is not None
            else ""
        )
        lacks = f"the quote lacks the question's key terms: coverage {covered:.2f} < {min_coverage}"
        return f"{lacks}{also}"
    return None
