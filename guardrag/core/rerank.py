"""Rerankers: the offline fused scorer (default) and a real cross-encoder behind an HTTP
endpoint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from guardrag.config.settings import Settings
from guardrag.core.kb.stats import KBStats, point_text
from guardrag.core.text import asks_for_definition, coverage, opens_as_definition


class RerankUnavailable(RuntimeError):
    """The configured reranker could not score; the pipeline falls back to fused scoring."""


class Scorable(Protocol):
    """A retrieved entry: its payload and the query's cosine to its title and its content."""

    @property
    def payload(self) -> dict[str, Any]: ...

    @property
    def dense(self) -> float: ...

    @property
    def content(self) -> float | None: ...


def semantic_similarity(hit: Scorable, w_title: float = 0.6) -> float:
    """Cosine of the query to the entry's title (question) blended with its content (answer)."""
    semantic = max(hit.dense, 0.0)
    if hit.content is not None:
        semantic = w_title * semantic + (1 - w_title) * max(hit.content, 0.0)
    return semantic


def answers_in_kind(question: str, payload: dict[str, Any]) -> bool:
    """Whether an entry's own answer can answer the question verbatim: "What is fraud?" asks for
    a definition, which "How do I report a scam or fraud?" does not give however close it ranks
    (such a question is unsure: asked again, written from the passages, or refused)."""
    asked = str(payload.get("question") or payload.get("title") or "")
    return not asks_for_definition(question) or opens_as_definition(asked)


def lexical_coverage(query: str, texts: Sequence[str], stats: KBStats | None) -> float:
    """Share of the query's content words (IDF-weighted when KB stats are known) in `texts`."""
    text = " ".join(texts)
    return stats.idf_coverage(query, text) if stats else coverage(query, text)


class Reranker(Protocol):
    @property
    def name(self) -> str: ...

    def score(
        self, query: str, hits: Sequence[Scorable], stats: KBStats | None = None
    ) -> list[float]:
        """A relevance score in [0, 1] per hit, same order."""
        ...


@dataclass(frozen=True)
class FusedReranker:
    """Calibrated blend of semantic similarity and IDF-weighted coverage of the query's words.

    Semantic similarity mixes the query's cosine to the entry's question (title) and to its
    answer (content): the question catches paraphrase, the answer catches what the entry is
    really about. Coverage catches the specific term asked about (a fee, a product) that
    embeddings blur, weighted by IDF so the KB's own brand name counts for little. Weights and
    the thresholds in RunConfig were fitted on datasets/ewallet/golden.jsonl (see docs/RESULTS.md).
    """

    w_title: float = 0.6
    w_semantic: float = 0.8
    name: str = "fused"

    def score(
        self, query: str, hits: Sequence[Scorable], stats: KBStats | None = None
    ) -> list[float]:
        return [
            self.w_semantic * semantic_similarity(hit, self.w_title)
            + (1 - self.w_semantic) * lexical_coverage(query, [point_text(hit.payload)], stats)
            for hit in hits
        ]


@dataclass(frozen=True)
class HttpReranker:
    """A cross-encoder served over HTTP in the text-embeddings-inference `/rerank` format."""

    url: str
    timeout_s: float = 5.0
    name: str = "http"

    def score(
        self, query: str, hits: Sequence[Scorable], stats: KBStats | None = None
    ) -> list[float]:
        texts = [point_text(h.payload) for h in hits]
        try:
            response = httpx.post(
                self.url, json={"query": query, "texts": texts}, timeout=self.timeout_s
            )
            response.raise_for_status()
            scores = [0.0] * len(hits)
            for item in response.json():
                scores[int(item["index"])] = float(item["score"])
            return scores
        except (httpx.HTTPError, KeyError, ValueError, TypeError, IndexError) as exc:
            raise RerankUnavailable(f"reranker at {self.url} failed: {exc}") from exc


def load_reranker(settings: Settings) -> Reranker:
    """The cross-encoder at GUARDRAG_RERANK_URL when set, else the offline fused scorer."""
    return HttpReranker(settings.rerank_url) if settings.rerank_url else FusedReranker()


@dataclass(frozen=True)
class Agreement:
    """How two wordings of one question rank the same KB entries (rerank after `rephrase`)."""

    agreed: bool
    entry: str | None  # the id both rank first, when they do
    score: float  # its average score over both wordings
    lead: float  # over the runner-up's average
    why: str


def agreement(
    first: Sequence[tuple[str, float]],
    second: Sequence[tuple[str, float]],
    threshold: float,
    margin: float,
    tie: float = 0.0,
) -> Agreement:
    """Do both rankings ((entry id, score), best first) put the same entry first, and does it
    clear `threshold` and lead the runner-up by `margin` on the average of the two scores?
    An entry only one wording found counts 0 for the other. A wording that ranks another entry
    first by less than `tie` (a near tie, its own unsure band) does not contradict the other:
    "I just sent a transfer, can I undo it?" ties two transfer entries; "Can I cancel my
    transfer?" settles it."""
    if not first or not second:
        return Agreement(False, None, 0.0, 0.0, "a wording found nothing")
    one, two = dict(first), dict(second)
    average = sorted(
        ((key, (one.get(key, 0.0) + two.get(key, 0.0)) / 2) for key in {*one, *two}),
        key=lambda pair: pair[1],
        reverse=True,
    )
    top, score = average[0]
    lead = score - (average[1][1] if len(average) > 1 else 0.0)
    behind = max(ranking[0][1] - dict(ranking).get(top, 0.0) for ranking in (first, second))
    if behind > tie or (behind > 0 and first[0][0] != top and second[0][0] != top):
        return Agreement(False, None, score, lead, "the two wordings rank different entries first")
    if score < threshold:
        return Agreement(False, top, score, lead, f"average {score:.3f} < threshold {threshold}")
    if lead < margin:
        return Agreement(False, top, score, lead, f"lead {lead:.3f} < margin {margin}")
    if first[0][0] != top or second[0][0] != top:
        return Agreement(True, top, score, lead, "one wording settles the other's near tie")
    return Agreement(True, top, score, lead, "both wordings rank it first, clearly")
