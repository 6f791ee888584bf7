"""Domain classification: in domain, out of domain, or small talk, learned from the KB itself.

Evidence: the question's best cosine to any KB entry (from the index), against its best cosine
to generic off-topic and greeting exemplars, plus other companies' names the KB never mentions
and requests for work on a text ("translate ...", "write me a ..."), which are no question
about the KB whatever the text they quote is about. No per-KB hand-written rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from guardrag.config.exemplars.domain import (
    GREETINGS,
    OFF_TOPIC,
    OTHER_BRANDS,
    TEXT_TASK_VERBS,
    WRITING_OBJECTS,
    WRITING_VERBS,
)
from guardrag.core.embedder import Embedder
from guardrag.core.kb.stats import joined_words
from guardrag.core.shipped_vectors import shipped

if TYPE_CHECKING:
    from guardrag.core.store import VectorStore

_TEXT_TASK = re.compile(
    r"^\W*(?:(?:please|pls|kindly|tolong|boleh|can|could|would|will|you|anda|awak)\W+)*"
    rf"({'|'.join(TEXT_TASK_VERBS)}|(?:{'|'.join(WRITING_VERBS)})"
    rf"(?=\s+(?:{'|'.join(WRITING_OBJECTS)})\b|\s*[\"'‘“:]))\b",
    re.IGNORECASE,
)


def text_task(question: str) -> str | None:
    """The verb when the message asks for work on a text rather than asking a question."""
    found = _TEXT_TASK.match(question)
    return found.group(1).lower() if found else None


@dataclass(frozen=True)
class DomainVerdict:
    domain: str  # "in_domain" | "out_of_domain" | "greeting"
    rule: str
    score: float
    threshold: float
    detail: dict[str, Any] = field(default_factory=dict)


class DomainClassifier:
    """Holds the exemplar embeddings (shipped with the package, see core/shipped_vectors)."""

    def __init__(self, embedder: Embedder) -> None:
        self._off_topic = shipped(embedder, OFF_TOPIC)
        self._greetings = shipped(embedder, GREETINGS)

    def classify(
        self,
        question: str,
        vector: np.ndarray,
        kb_best: float,
        kb_vocabulary: frozenset[str],
        *,
        min_similarity: float,
        margin: float,
        greeting_similarity: float,
    ) -> DomainVerdict:
        off_topic = float(np.max(self._off_topic @ vector))
        greeting = float(np.max(self._greetings @ vector))
        scores = {
            "kb": round(kb_best, 4),
            "off_topic": round(off_topic, 4),
            "greeting": round(greeting, 4),
        }
        if greeting >= greeting_similarity and greeting > kb_best:
            return DomainVerdict(
                "greeting", "greeting_similarity", greeting, greeting_similarity, scores
            )
        task = text_task(question)
        if task:
            return DomainVerdict("out_of_domain", "text_task", 1.0, 1.0, {**scores, "verb": task})
        foreign = sorted((joined_words(question) & OTHER_BRANDS) - kb_vocabulary)
        if foreign:
            return DomainVerdict(
                "out_of_domain",
                "other_brand",
                kb_best,
                min_similarity,
                {**scores, "brands": foreign},
            )
        if kb_best < min_similarity:
            return DomainVerdict("out_of_domain", "kb_similarity", kb_best, min_similarity, scores)
        if kb_best - off_topic < margin:
            return DomainVerdict(
                "out_of_domain", "closer_to_off_topic", kb_best - off_topic, margin, scores
            )
        return DomainVerdict("in_domain", "kb_similarity", kb_best, min_similarity, scores)


#: Entries the domain gate's probe reads (nearest by question vector, each with its answer's
#: cosine too).
PROBE_HITS = 10


def domain_gate(
    store: VectorStore,
    domain: DomainClassifier,
    kb: str,
    question: str,
    vector: Sequence[float],
    vocabulary: frozenset[str],
    **thresholds: float,
) -> tuple[DomainVerdict, float]:
    """The domain verdict on a question and its best cosine to the KB (to an entry's question
    or its answer: a short question about a detail of an answer is as much in domain as a
    paraphrase of an entry's question). `thresholds`: classify's min_similarity, margin and
    greeting_similarity."""
    probe = store.search(kb, list(vector), None, limit=PROBE_HITS)
    kb_best = max((max(h.dense, h.content or 0.0) for h in probe), default=0.0)
    verdict = domain.classify(
        question, np.asarray(vector, dtype=np.float32), kb_best, vocabulary, **thresholds
    )
    return verdict, kb_best
