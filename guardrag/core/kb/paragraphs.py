"""Numbered paragraphs of a document, and the passages that name them.

A guideline or policy numbers its paragraphs ("1.4.1 Refer people ...") and restates them
elsewhere: a symptom table whose rows end "[1.4.1]", a rationale that speaks of
"recommendations 1.6.1 and 1.6.2". An answer taken from such a restatement is cited by the
paragraph it names too, so a reader finds the paragraph itself, not only its echo.

At ingest, `paragraph_map` records for each document the chunk each numbered paragraph starts
(`KBInfo.extra["paragraphs"]`: source file -> number -> source id). At answer time,
`named_paragraphs` finds which of those numbers the passage an answer comes from names: the
numbers the answer itself repeats from the passage, else those of the passage's one sentence
or table row that holds most of the answer's words. A number the document does not start a
paragraph with names nothing; a numbered paragraph's own cross-references ("see 1.3.2") are
not restatements and name nothing either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from guardrag.core.quote import answer_units, own_text
from guardrag.core.text import content_words

#: KBInfo.extra key of the map: source file -> paragraph number -> source id of its chunk.
PARAGRAPHS = "paragraphs"
#: Paragraphs named first in one answer's citations at most.
MOST_NAMED = 3

_NUMBER = r"\d+(?:\.\d+)+"
#: A chunk that starts a numbered paragraph: "1.4.1 Refer ..." (not "2.5 million ...").
_STARTS = re.compile(rf"^({_NUMBER})\s+[A-Z(\"'‘“]")
#: "[1.4.1]", "[1.1.2, 1.1.5]": numbers alone in brackets.
_BRACKETED = re.compile(rf"\[\s*({_NUMBER}(?:\s*(?:,|;|and|&)\s*{_NUMBER})*)\s*\]")
#: "recommendation 1.4.1", "recommendations 1.6.1 and 1.6.2", "section 3.2", "para. 4.1".
_WORDED = re.compile(
    rf"\b(?:recommendations?|paragraphs?|paras?\.?|sections?|clauses?|§)\s*"
    rf"({_NUMBER}(?:\s*(?:,|;|and|or|to|&)\s*{_NUMBER})*)",
    re.IGNORECASE,
)
_CHUNK_INDEX = re.compile(r"-(\d+)$")


def paragraph_number(text: str) -> str | None:
    """The number a chunk's text starts with when it starts a numbered paragraph."""
    found = _STARTS.match(text.lstrip())
    return found.group(1) if found else None


def paragraph_map(payloads: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each document's numbered paragraphs and the chunk each starts in: source file ->
    number -> source id. A paragraph cut into several chunks (each repeating its number) maps
    to its first; a number that starts chunks in two sections of one document is ambiguous
    (an appendix numbering afresh) and left out."""
    found: dict[tuple[str, str], set[tuple[str, int, str]]] = {}
    for payload in payloads:
        if payload.get("kind") != "doc":
            continue
        number = paragraph_number(str(payload.get("text") or ""))
        if number is None:
            continue
        source_id = str(payload.get("source_id") or "")
        index = _CHUNK_INDEX.search(source_id)
        key = (str(payload.get("source_file") or ""), number)
        section = str(payload.get("section") or "")
        found.setdefault(key, set()).add((section, int(index.group(1)) if index else 0, source_id))
    paragraphs: dict[str, dict[str, str]] = {}
    for (source_file, number), chunks in sorted(found.items()):
        if len({section for section, _, _ in chunks}) == 1:
            paragraphs.setdefault(source_file, {})[number] = min(chunks)[2]
    return paragraphs


def numbered(payloads: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The KBInfo.extra entry of a KB's numbered paragraphs; nothing when it has none."""
    paragraphs = paragraph_map(payloads)
    return {PARAGRAPHS: paragraphs} if paragraphs else {}


def references(text: str) -> list[str]:
    """The paragraph numbers `text` names, in order, each once."""
    spans = [(m.start(), m.group(1)) for m in _BRACKETED.finditer(text)]
    spans += [(m.start(), m.group(1)) for m in _WORDED.finditer(text)]
    named: dict[str, None] = {}
    for _, span in sorted(spans):
        named.update((number, None) for number in re.findall(_NUMBER, span))
    return list(named)


def _own_words(unit: str) -> set[str]:
    return set(content_words(own_text(unit)))


def _drawn_unit(answer: str, passage: str) -> str | None:
    """The passage's one sentence or table row that holds most of the answer's words; None
    when two hold as many (which one the answer restates cannot be told)."""
    wanted = set(content_words(answer))
    scored = sorted(
        ((len(wanted & _own_words(unit)), unit) for unit in answer_units(passage)),
        key=lambda pair: pair[0],
        reverse=True,
    )
    if not scored or scored[0][0] == 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def named_paragraphs(answer: str, passage: str, numbered: Mapping[str, str]) -> list[str]:
    """The numbers of `numbered` (the passage's document's paragraphs) that the part of
    `passage` the answer comes from names: those the answer repeats from the passage, else
    those of the passage's unit that holds most of the answer's words. Nothing for a passage
    that is itself a numbered paragraph."""
    if not numbered or paragraph_number(passage) in numbered:
        return []
    in_passage = set(references(passage)) & set(numbered)
    if not in_passage:
        return []
    named = [n for n in references(answer) if n in in_passage]
    if not named:
        unit = _drawn_unit(answer, passage)
        named = [n for n in references(unit) if n in in_passage] if unit else []
    return named[:MOST_NAMED]


#: Citation markers and paragraph tags ("[2]", "[1.4.1]") are no figures of an answer.
_BRACKETS = re.compile(r"\[[^\]]*\]")


def states_figures(answer: str, paragraph: str) -> bool:
    """Whether `paragraph` states every figure `answer` states (an age, a threshold, a time
    frame; of a quoted table row, its own cells): only then is it cited first. A paragraph an
    update note names ("recommendations 1.2.1 and 1.2.7 were amended") need not hold the
    note's figures, and the first citation is where a reader checks them."""
    from guardrag.core.grounding.numbers import (  # lazy: grounding is slow to import
        extract_mentions,
        same_fact,
    )

    stated = extract_mentions(_BRACKETS.sub(" ", paragraph))
    return all(
        any(same_fact(figure, held) for held in stated)
        for figure in extract_mentions(_BRACKETS.sub(" ", own_text(answer)))
    )
