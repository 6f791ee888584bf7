"""Graph state: what callers pass in, and the working state the nodes share."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from guardrag.contract import Citation, Decision, Refusal, Route, Usage

Domain = Literal["in_domain", "out_of_domain", "greeting"]


class InputState(TypedDict, total=False):
    """All a caller provides: the question, and which knowledge base to ask."""

    question: str
    kb: str


@dataclass(frozen=True)
class Candidate:
    """A retrieved entry with the scores that ranked it (rerank fills `score`)."""

    id: str
    payload: dict[str, Any]
    fused: float
    dense: float
    content: float | None
    sparse: float | None
    score: float

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
