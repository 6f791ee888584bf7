"""Graph state: what callers pass in, and the working state the nodes share."""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields
from typing import Annotated, Literal, TypedDict

from guardrag.contract import Citation, Decision, Refusal, Route, Usage
from guardrag.store import Hit

Domain = Literal["in_domain", "out_of_domain", "greeting"]


class InputState(TypedDict, total=False):
    """All a caller provides: the question, and which knowledge base to ask."""

    question: str
    kb: str


@dataclass(frozen=True)
class Candidate(Hit):
    """A retrieved entry with the score that ranked it (rerank sets `score`)."""

    score: float = 0.0

    @classmethod
    def of(cls, hit: Hit, score: float) -> Candidate:
        return cls(**{f.name: getattr(hit, f.name) for f in fields(Hit)}, score=score)

    @property
    def is_faq(self) -> bool:
        return self.payload.get("kind") == "faq"

    def citation(self) -> Citation:
        return Citation(
            source_id=str(self.payload.get("source_id", self.id)),
            title=str(self.payload.get("title", "")),
            url=self.payload.get("url"),
            score=round(self.score, 4),
        )


class PipelineState(InputState, total=False):
    """Working state. `trail` accumulates (one Decision per node run); the rest is overwritten."""

    query_vector: list[float]
    domain: Domain
    kb_similarity: float
    candidates: list[Candidate]
    passages: list[Candidate]
    draft: str
    answer: str
    route: Route | None
    citations: list[Citation]
    confidence: float
    refusal: Refusal | None
    usage: Usage
    trail: Annotated[list[Decision], operator.add]
