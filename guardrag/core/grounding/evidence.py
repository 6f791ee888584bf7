"""Passages split once per check into what claims are compared with: sentences, clauses,
numbers and names, and the units (a sentence, a passage, several passages) a claim may match."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from guardrag.core.grounding.entities import entity_index
from guardrag.core.grounding.lexicon import content_words
from guardrag.core.grounding.numbers import (
    Mention,
    clause_spans,
    extract_mentions,
    frequencies,
    rates,
)
from guardrag.core.grounding.report import Passage
from guardrag.core.grounding.split import lines_of, split_sentences, strip_citations

# ----------------------------------------------------------------------------------- checking


@dataclass(frozen=True)
class Clause:
    number: int  # the passage
    text: str
    sentence: str  # the sentence it belongs to (its embedding breaks ties)
    words: frozenset[str]
    mentions: tuple[Mention, ...]


@dataclass(frozen=True)
class Part:
    """A sentence's part between list breaks outside parentheses: "cash top-ups (RM1)" or "ATM
    withdrawals (RM1 local, RM10 plus 1% overseas)" of a list of priced things."""

    number: int  # the passage
    sentence: int  # its sentence's index in the passage
    text: str
    subject: frozenset[str]  # content words outside parentheses: what the part is about
    mentions: tuple[Mention, ...]
    in_list: bool  # its sentence has at least MIN_LIST_ITEMS parts
    words: frozenset[str]  # all its content words, parentheses included


#: A sentence of this many parts or more is a list of things.
MIN_LIST_ITEMS = 3
_PART_BREAK_RE = re.compile(r"[,;]|\s(?:and|or)\s")
_PARENTHESES_RE = re.compile(r"\([^()]*\)")


def top_level_parts(sentence: str) -> list[str]:
    """`sentence` split at commas, semicolons, "and" and "or" outside parentheses."""
    parts, depth, start = [], 0, 0
    breaks = {m.start(): m.end() for m in _PART_BREAK_RE.finditer(sentence)}
    for i, ch in enumerate(sentence):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and i in breaks and i >= start:
            parts.append(sentence[start:i])
            start = breaks[i]
    parts.append(sentence[start:])
    return [p for p in parts if p.strip()]


def _parts(number: int, sentences: Sequence[str]) -> tuple[Part, ...]:
    out: list[Part] = []
    for index, sentence in enumerate(sentences):
        texts = top_level_parts(sentence)
        for text in texts:
            subject = frozenset(content_words(_PARENTHESES_RE.sub(" ", text)))
            mentions = tuple(extract_mentions(text))
            listed = len(texts) >= MIN_LIST_ITEMS
            words = frozenset(content_words(text))
            out.append(Part(number, index, text, subject, mentions, listed, words))
    return tuple(out)


def _clauses(number: int, sentence: str) -> list[Clause]:
    """The sentence's clauses. A clause that opens with its figure shares the words before the
    previous clause's figure: in "arrives within 5-7 working days in Peninsular Malaysia and
    7-14 working days in Sabah" the second clause also "arrives within" (the verb is said once)."""
    out: list[Clause] = []
    lead: frozenset[str] = frozenset()
    for a, b in clause_spans(sentence):
        text = sentence[a:b]
        mentions = tuple(extract_mentions(text))
        words = frozenset(content_words(text))
        if mentions and not text[: mentions[0].start].strip():
            words |= lead
        elif mentions:
            lead = frozenset(content_words(text[: mentions[0].start]))
        out.append(Clause(number, text, sentence, words, mentions))
    return out


@dataclass(frozen=True)
class Source:
    """One passage, pre-split: sentences (units), clauses (for number binding), parts (for
    figures of listed things), facts."""

    passage: Passage
    sentences: tuple[str, ...]
    words: dict[str, frozenset[str]]  # content words of each sentence
    clauses: tuple[Clause, ...]
    parts: tuple[Part, ...]
    mentions: tuple[Mention, ...]
    frequencies: frozenset[str]
    entities: frozenset[str]
    rates: tuple[tuple[Mention, Mention], ...]  # quantities it states as equal


def prepare(passage: Passage) -> Source:
    """Split a passage once per check: sentences, their words, clauses, numbers, names."""
    sentences = tuple(
        strip_citations(s) for line in lines_of(passage.text) for s in split_sentences(line)
    ) or (passage.text,)
    clauses = [clause for s in sentences for clause in _clauses(passage.number, s)]
    return Source(
        passage=passage,
        sentences=sentences,
        words={x: frozenset(content_words(x)) for x in sentences},
        clauses=tuple(clauses),
        parts=_parts(passage.number, sentences),
        mentions=tuple(extract_mentions(passage.text)),
        frequencies=frozenset(frequencies(passage.text)),
        entities=frozenset(entity_index(passage.text)),
        rates=tuple(pair for s in sentences for pair in rates(s)),
    )


@dataclass(frozen=True)
class Unit:
    """What a claim is compared with: one sentence, a whole passage, or several passages."""

    numbers: tuple[int, ...]  # passages it comes from
    sentences: tuple[str, ...]
    words: frozenset[str]


def units(sources: Sequence[Source]) -> list[Unit]:
    """Sentences, whole passages and (for several cited passages) all of them together."""
    units: list[Unit] = []
    for src in sources:
        n = (src.passage.number,)
        units += [Unit(n, (s,), src.words[s]) for s in src.sentences]
        if len(src.sentences) > 1:
            words = frozenset().union(*src.words.values())
            units.append(Unit(n, src.sentences, words))
    if len(sources) > 1:
        numbers = tuple(s.passage.number for s in sources)
        sentences = tuple(x for s in sources for x in s.sentences)
        words = frozenset().union(*(s.words[x] for s in sources for x in s.sentences))
        units.append(Unit(numbers, sentences, words))
    return units


def unit_vector(unit: Unit, vectors: dict[str, np.ndarray]) -> np.ndarray:
    """A multi-sentence unit is the normalised mean of its sentences: one embedding per sentence,
    never one per passage (long texts dominate the cost of a batch)."""
    if len(unit.sentences) == 1:
        return vectors[unit.sentences[0]]
    mean = np.mean([vectors[s] for s in unit.sentences], axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-12)


def cite_label(numbers: Iterable[int]) -> str:
    return "".join(f"[{n}]" for n in numbers)
