"""Graph state: what callers pass in, and the working state the nodes share."""

from __future__ import annotations

import types
from dataclasses import dataclass, fields
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import BaseModel

from guardrag.contract import Choice, Citation, Decision, Refusal, Route, Usage
from guardrag.core.store import Hit

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

    @property
    def answer(self) -> str:
        """What the entry says: an FAQ entry's answer, a document chunk's text."""
        return str(self.payload.get("answer") or self.payload.get("text") or "")

    def citation(self) -> Citation:
        return Citation(
            source_id=str(self.payload.get("source_id", self.id)),
            title=str(self.payload.get("title", "")),
            url=self.payload.get("url"),
            score=round(self.score, 4),
            label=self.payload.get("label"),
        )


class Turn(TypedDict):
    """One earlier exchange of a conversation: the standalone question, what was answered, and
    the questions of the entries offered instead of an answer (a reply may pick one by number)."""

    question: str
    answer: str
    choices: NotRequired[list[str]]


#: Turns a thread remembers; older ones drop off (they rarely matter to a follow-up).
MAX_TURNS = 5


def add_decisions(trail: list[Decision], update: list[Decision] | None) -> list[Decision]:
    """Appends a node's decisions; `None` (sent by `start_turn`) starts a new turn's trail."""
    return [] if update is None else [*trail, *update]


def add_usage(total: Usage | None, more: Usage | None) -> Usage:
    """Sums the tokens of every model call in a turn (contextualize, rephrase, generate);
    `None` (sent by `start_turn`) starts a new turn's count."""
    return Usage() if more is None else (total or Usage()) + more


def add_turns(history: list[Turn], update: list[Turn]) -> list[Turn]:
    return [*history, *update][-MAX_TURNS:]


class PipelineState(InputState, total=False):
    """Working state. `trail` accumulates one Decision per node run within a turn; `history`
    keeps a thread's recent turns across invocations (with a checkpointer); the rest is
    overwritten, and `start_turn` clears it so nothing leaks from one turn into the next.
    """

    query_vector: list[float]
    follow_up: str  # the customer's own words when contextualize prepended the last question
    rephrase_tried: bool  # `rephrase` runs at most once a turn
    rephrased: str  # the question in the model's words, when that helped
    rephrased_vector: list[float]
    first_ranking: list[Candidate]  # rerank's ranking of the customer's own wording
    parts: list[str]  # the questions a several-part message asks
    part_candidates: list[list[Candidate]]  # retrieved for each part
    uncovered: list[str]  # parts the answer could not cover
    domain: Domain | None
    kb_similarity: float
    candidates: list[Candidate]
    passages: list[Candidate]
    passages_unsure: bool  # document passages past rerank without the question's words: judged
    draft: str
    quote_from: list[Candidate]  # the document passage `quote` answers from, when ground failed
    answer: str
    route: Route | None
    citations: list[Citation]
    choices: list[Choice]  # entries offered instead of an answer (outcome "choices")
    confidence: float
    refusal: Refusal | None
    usage: Annotated[Usage, add_usage]
    trail: Annotated[list[Decision], add_decisions]
    history: Annotated[list[Turn], add_turns]


#: Fields a thread keeps from one turn to the next; everything else is per turn.
KEPT_ACROSS_TURNS = frozenset({*InputState.__annotations__, "history"})


def fresh_turn() -> dict[str, Any]:
    """The value each per-turn field starts from, derived from the fields' own types:
    a list is empty, a number 0, text "", an optional None, a model its defaults, and the
    trail None (its reducer starts a new one). A field of any other type raises, so a new
    field cannot be forgotten here."""
    fresh: dict[str, Any] = {}
    for name, hint in get_type_hints(PipelineState, include_extras=True).items():
        if name in KEPT_ACROSS_TURNS:
            continue
        if get_origin(hint) is Annotated or (
            get_origin(hint) in (types.UnionType, Union) and type(None) in get_args(hint)
        ):  # a reducer: None tells add_decisions to start over
            fresh[name] = None
        elif get_origin(hint) is list:
            fresh[name] = []
        elif hint in (str, float, int, bool) or (
            isinstance(hint, type) and issubclass(hint, BaseModel)
        ):
            fresh[name] = hint()
        else:
            raise TypeError(f"PipelineState.{name}: no fresh value for {hint!r}")
    return fresh
