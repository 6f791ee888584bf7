"""A second, stronger embedder's view of a ranking rerank is unsure about.

MiniLM (the product's embedder) puts a gold entry first less often than all-mpnet-base-v2, which
costs several times more per text (figures: docs/RESULTS.md). So it is asked only where MiniLM's
first place is unsure, and only about the candidates already retrieved: the question and their FAQ
questions (titles) are embedded by MPNet, and the product's fused formula is applied again with
MPNet's title cosine in place of MiniLM's (answer cosine and word coverage as before: embedding
whole answers would cost 10x more and measured no better). Titles are cached per process, so a KB's
entries are embedded once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardrag.core.embedder import Encoder
from guardrag.core.mpnet import MPNET, installed_mpnet, shared_mpnet
from guardrag.core.rerank import FusedReranker, Scorable

if TYPE_CHECKING:
    import numpy as np

    from guardrag.config.settings import Settings
    from guardrag.core.kb.stats import KBStats

#: Titles kept embedded (768 float32 each: 100k titles ~300 MB).
CACHED_TITLES = 100_000


@dataclass(frozen=True)
class Opinion:
    """The second ranking: (entry id, score) best first, over the candidates asked about."""

    ranking: list[tuple[str, float]]

    @property
    def lead(self) -> float:
        """How far its first place is ahead of its second."""
        if not self.ranking:
            return 0.0
        return self.ranking[0][1] - (self.ranking[1][1] if len(self.ranking) > 1 else 0.0)

    def agrees(self, entry: str, margin: float) -> bool:
        """It ranks `entry` first, ahead of the runner-up by `margin`."""
        return bool(self.ranking) and self.ranking[0][0] == entry and self.lead >= margin


@dataclass(frozen=True)
class _Retitled:
    """A candidate as the fused formula sees it, with another title cosine."""

    payload: dict[str, Any]
    dense: float
    content: float | None


class SecondOpinion:
    """Title similarities by a second embedder, with a per-process cache of title vectors."""

    def __init__(self, load: Encoder | Path, name: str = MPNET.name) -> None:
        self._encoder = shared_mpnet(load) if isinstance(load, Path) else load
        self.name = name
        self._titles: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def similarities(self, question: str, titles: Sequence[str]) -> list[float]:
        """Cosine of the question to each title."""
        with self._lock:
            known = {t: self._titles[t] for t in titles if t in self._titles}
        missing = list(dict.fromkeys(t for t in titles if t not in known))
        vectors = self._encoder.embed([question, *missing])  # a broken model raises RuntimeError
        known.update(zip(missing, vectors[1:], strict=True))
        with self._lock:
            for title in titles:
                self._titles[title] = known[title]
                self._titles.move_to_end(title)
            while len(self._titles) > CACHED_TITLES:
                self._titles.popitem(last=False)
        return [float(vectors[0] @ known[t]) for t in titles]

    def rank(self, question: str, candidates: Sequence[Scorable], stats: KBStats | None) -> Opinion:
        """The candidates ranked by the fused formula with this model's title cosine; a document
        passage keeps MiniLM's (its title vector holds its text, which is not re-embedded)."""
        titles = {
            i: str(c.payload["question"])
            for i, c in enumerate(candidates)
            if c.payload.get("kind") == "faq" and c.payload.get("question")
        }
        cosines = dict(zip(titles, self.similarities(question, list(titles.values())), strict=True))
        rescored = [
            _Retitled(c.payload, cosines.get(i, c.dense), c.content)
            for i, c in enumerate(candidates)
        ]
        scores = FusedReranker().score(question, rescored, stats)
        ranking = sorted(
            ((str(c.payload.get("source_id")), s) for c, s in zip(candidates, scores, strict=True)),
            key=lambda pair: pair[1],
            reverse=True,
        )
        return Opinion(ranking)


def load_second_opinion(settings: Settings) -> tuple[SecondOpinion | None, str | None]:
    """The installed second opinion (its weights load on first use), or None and why not."""
    encoder, problem = installed_mpnet(settings)
    return (SecondOpinion(encoder), None) if encoder is not None else (None, problem)
