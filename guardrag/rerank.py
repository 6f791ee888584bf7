"""Rerankers: the offline fused scorer (default) and a real cross-encoder behind an HTTP endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Protocol

import httpx

from guardrag.text import coverage


class RerankUnavailable(RuntimeError):
    """The configured reranker could not score; the pipeline falls back to fused scoring."""


class Scorable(Protocol):
    """A retrieved entry: its payload (title, text) and the query's cosine to it."""

    @property
    def payload(self) -> dict[str, Any]: ...

    @property
    def dense(self) -> float: ...


class Reranker(Protocol):
    name: str

    def score(self, query: str, hits: Sequence[Scorable]) -> list[float]:
        """A relevance score in [0, 1] per hit, same order."""
        ...


@dataclass(frozen=True)
class FusedReranker:
    """Calibrated blend of dense similarity and lexical coverage of the query's content words.

    Dense similarity catches paraphrase; coverage catches the specific term the user asked about
    (an amount, a product name) that embeddings blur, and penalises passages that match the
    topic but not the question. Weights were fitted on the golden sets (scripts/calibrate.py).
    """

    w_dense: float = 0.7
    w_title: float = 0.15
    w_body: float = 0.15
    name: str = "fused"

    def score(self, query: str, hits: Sequence[Scorable]) -> list[float]:
        return [
            self.w_dense * max(hit.dense, 0.0)
            + self.w_title * coverage(query, str(hit.payload.get("title", "")))
            + self.w_body * coverage(query, f"{hit.payload.get('title', '')} {hit.payload.get('text', '')}")
            for hit in hits
        ]


@dataclass(frozen=True)
class HttpReranker:
    """A cross-encoder served over HTTP in the text-embeddings-inference `/rerank` format."""

    url: str
    timeout_s: float = 5.0
    name: str = "http"

    def score(self, query: str, hits: Sequence[Scorable]) -> list[float]:
        texts = [f"{h.payload.get('title', '')}\n{h.payload.get('text', '')}" for h in hits]
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
