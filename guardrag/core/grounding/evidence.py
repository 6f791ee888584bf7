"""Passages split once per check into what claims are compared with: sentences, clauses,
numbers and names, and the units (a sentence, a passage, several passages) a claim may match."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from guardrag.core.grounding.entities import entity_index
from guardrag.core.grounding.lexicon import content_words
from guardrag.core.grounding.numbers import Mention, clause_spans, extract_mentions, frequencies
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
class Source:
    """One passage, pre-split: sentences (units), clauses (for number binding), facts."""

    passage: Passage
    sentences: tuple[str, ...]
    words: dict[str, frozenset[str]]  # content words of each sentence
    clauses: tuple[Clause, ...]
    mentions: tuple[Mention, ...]
    frequencies: frozenset[str]
    entities: frozenset[str]


def prepare(passage: Passage) -> Source:
    """Split a passage once per check: sentences, their words, clauses, numbers, names."""
    sentences = tuple(
        strip_citations(s) for line in lines_of(passage.text) for s in split_sentences(line)
    ) or (passage.text,)
    clauses = [
        Clause(
            passage.number,
            s[a:b],
            s,
            frozenset(content_words(s[a:b])),
            tuple(extract_mentions(s[a:b])),
        )
        for s in sentences
        for a, b in clause_spans(s)
    ]
    return Source(
        passage=passage,
        sentences=sentences,
        words={x: frozenset(content_words(x)) for x in sentences},
        clauses=tuple(clauses),
        mentions=tuple(extract_mentions(passage.text)),
        frequencies=frozenset(frequencies(passage.text)),
        entities=frozenset(entity_index(passage.text)),
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
