"""Domain classification: in domain, out of domain, or small talk, learned from the KB itself.

Evidence: the question's best cosine to any KB entry (from the index), against its best cosine
to generic off-topic and greeting exemplars, plus other companies' names the KB never mentions.
No per-KB hand-written rules.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from config.exemplars import GREETINGS, OFF_TOPIC, OTHER_BRANDS
from guardrag.embedder import Embedder
from guardrag.text import normalise

_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class DomainVerdict:
    domain: str  # "in_domain" | "out_of_domain" | "greeting"
    rule: str
    score: float
    threshold: float
    detail: dict[str, Any] = field(default_factory=dict)


def _joined_words(text: str) -> set[str]:
    """Words and adjacent pairs glued together, so "Grab Pay" and "GrabPay" both match."""
    words = _WORD.findall(normalise(text))
    return set(words) | {a + b for a, b in zip(words, words[1:], strict=False)}


class DomainClassifier:
    """Holds exemplar embeddings (computed once) and each KB's vocabulary (per snapshot)."""

    def __init__(self, embedder: Embedder) -> None:
        self._off_topic = embedder.embed(list(OFF_TOPIC))
        self._greetings = embedder.embed(list(GREETINGS))
        self._vocab: dict[tuple[str, str], frozenset[str]] = {}
        self._lock = threading.Lock()

    def vocabulary(
        self, kb: str, snapshot_id: str, texts: Callable[[], Iterable[str]]
    ) -> frozenset[str]:
        """Words of a KB snapshot, computed once per snapshot from `texts()`."""
        key = (kb, snapshot_id)
        with self._lock:
            if key not in self._vocab:
                words: set[str] = set()
                for text in texts():
                    words |= _joined_words(text)
                self._vocab = {k: v for k, v in self._vocab.items() if k[0] != kb}
                self._vocab[key] = frozenset(words)
            return self._vocab[key]

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
        scores = {"kb": round(kb_best, 4), "off_topic": round(off_topic, 4), "greeting": round(greeting, 4)}
        if greeting >= greeting_similarity and greeting > kb_best:
            return DomainVerdict("greeting", "greeting_similarity", greeting, greeting_similarity, scores)
        foreign = sorted((_joined_words(question) & OTHER_BRANDS) - kb_vocabulary)
        if foreign:
            return DomainVerdict(
                "out_of_domain", "other_brand", kb_best, min_similarity, {**scores, "brands": foreign}
            )
        if kb_best < min_similarity:
            return DomainVerdict("out_of_domain", "kb_similarity", kb_best, min_similarity, scores)
        if kb_best - off_topic < margin:
            return DomainVerdict(
                "out_of_domain", "closer_to_off_topic", kb_best - off_topic, margin, scores
            )
        return DomainVerdict("in_domain", "kb_similarity", kb_best, min_similarity, scores)
