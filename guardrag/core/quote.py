"""Quoting a document: the one or two sentences of a passage that answer the question, in the
document's own words, so that no model has to write (and cannot invent a figure).

A passage is cut into answer units: a sentence, or a lead-in that ends with a colon together
with the list items that complete it ("Refer people ... if they: - are aged 40 and over ...").
Each unit is scored against the question by the embedder and by the question's words it holds;
the best unit is quoted, with its neighbour when that scores nearly as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from guardrag.core.embedder import Encoder
from guardrag.core.text import coverage

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[•])")
_ITEM = re.compile(r"^\s*(?:[-•*–·▪]|\(?[a-z0-9]{1,3}[.)])\s+")
#: A neighbouring unit is quoted too when its score is within this of the best one's.
NEIGHBOUR = 0.05
#: Units quoted at most.
MOST_UNITS = 2


@dataclass(frozen=True)
class Quote:
    """The quoted text, which units of the passage it is, and how well the best one scored."""

    text: str
    units: tuple[int, ...]
    similarity: float
    coverage: float


def answer_units(text: str) -> list[str]:
    """The passage as sentences, each colon lead-in joined with the list items after it."""
    units: list[str] = []
    open_list = False
    for line in (line.strip() for line in text.splitlines()):
        if not line:
            open_list = False
            continue
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
    covered = np.array([coverage(question, u) for u in units])
    score = similarity + 0.25 * covered
    best = int(np.argmax(score))
    chosen = {best}
    for neighbour in (best - 1, best + 1):
        close = 0 <= neighbour < len(units) and score[neighbour] >= score[best] - NEIGHBOUR
        if close and len(chosen) < MOST_UNITS:
            chosen.add(neighbour)
    # a list item never stands without its lead-in, a lead-in never without its items
    order = tuple(sorted(chosen))
    text = " ".join(units[i] for i in order)
    return Quote(text, order, float(similarity[best]), float(covered[best]))
