"""The result contract every caller sees (Python, CLI, HTTP, batch): ARCHITECTURE.md section 2."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field


class GuardragError(Exception):
    """A known failure with a message fit for the user (bad settings, file, knob or index).

    Faces catch this one class: the CLI prints the message and exits 2, the API answers 4xx.
    """


class RefusalReason(StrEnum):
    """Why a question was refused. Extend with care, never rename: auditors read these."""

    EMPTY_INPUT = "empty_input"
    INPUT_TOO_LONG = "input_too_long"
    PROMPT_INJECTION = "prompt_injection"
    JAILBREAK = "jailbreak"
    HARMFUL_REQUEST = "harmful_request"
    PII = "pii"  # asks for another person's personal data
    PERSONAL_DATA = "personal_data"  # writes personal data (an e-mail, phone, ID) into the message
    CREDENTIAL_REQUEST = "credential_request"  # asks for a PIN, password or code
    SHARED_SECRET = "shared_secret"  # writes their own PIN, password or one-time code into it
    PAYMENT_DATA = "payment_data"
    PROFANITY = "profanity"
    OUT_OF_DOMAIN = "out_of_domain"
    NO_RELEVANT_DOCS = "no_relevant_docs"
    LOW_CONFIDENCE = "low_confidence"
    NOT_GROUNDED = "not_grounded"
    UNSAFE_OUTPUT = "unsafe_output"
    # the KB's own answer, served verbatim, fails a content check (profanity): the operator's
    # entry to fix, not an attack
    UNSAFE_SOURCE = "unsafe_source"
    LLM_UNAVAILABLE = "llm_unavailable"
    INDEX_UNAVAILABLE = "index_unavailable"
    MODEL_UNAVAILABLE = "model_unavailable"


#: blocked: an attack on the assistant (a security team alerts on it). policy: a message the
#: bot does not take, though nobody attacked it (the customer's own card or phone number or
#: one-time code, profanity, an empty or overlong message, a KB answer with profanity).
#: not_found: the knowledge has no answer. error: we failed. docs/GUARDS.md, "What 'blocked' means".
RefusalKind = Literal["blocked", "policy", "not_found", "error"]

#: Every reason has exactly one kind, so "blocked" and "failed" are never confused.
REASON_KIND: dict[RefusalReason, RefusalKind] = {
    RefusalReason.EMPTY_INPUT: "policy",
    RefusalReason.INPUT_TOO_LONG: "policy",
    RefusalReason.PROMPT_INJECTION: "blocked",
    RefusalReason.JAILBREAK: "blocked",
    RefusalReason.HARMFUL_REQUEST: "blocked",
    RefusalReason.PII: "blocked",
    RefusalReason.PERSONAL_DATA: "policy",
    RefusalReason.CREDENTIAL_REQUEST: "blocked",
    RefusalReason.SHARED_SECRET: "policy",
    RefusalReason.PAYMENT_DATA: "policy",
    RefusalReason.PROFANITY: "policy",
    RefusalReason.UNSAFE_OUTPUT: "blocked",
    RefusalReason.UNSAFE_SOURCE: "policy",
    RefusalReason.OUT_OF_DOMAIN: "not_found",
    RefusalReason.NO_RELEVANT_DOCS: "not_found",
    RefusalReason.LOW_CONFIDENCE: "not_found",
    RefusalReason.NOT_GROUNDED: "not_found",
    RefusalReason.LLM_UNAVAILABLE: "error",
    RefusalReason.INDEX_UNAVAILABLE: "error",
    RefusalReason.MODEL_UNAVAILABLE: "error",
}

Verdict = Literal["pass", "hit", "miss", "block", "error"]
Route = Literal["exact_match", "semantic_match", "quoted", "generated"]
#: "choices": not answered (the refusal says why) but up to three KB entries close to the
#: question were offered; picking one asks that entry's own question. Never counted as answered.
Outcome = Literal["answered", "refused", "choices"]


class Decision(BaseModel):
    """One node's verdict, with the evidence behind it: the unit of the audit trail."""

    node: str
    verdict: Verdict
    reason: str = ""
    score: float | None = None
    threshold: float | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    ms: float = 0.0


class Refusal(BaseModel):
    reason: RefusalReason
    stage: str
    kind: RefusalKind
    message: str


class Citation(BaseModel):
    source_id: str
    title: str
    url: str | None = None
    score: float = 0.0
    #: How a person cites a document passage: "NG12 p.16", "Privacy policy > Sharing".
    label: str | None = None


class Choice(BaseModel):
    """A KB entry offered instead of an answer: its question, which a pick asks verbatim."""

    source_id: str
    title: str
    score: float = 0.0


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            estimated_cost_usd=round(self.estimated_cost_usd + other.estimated_cost_usd, 8),
        )


class Result(BaseModel):
    """What every caller gets back for one question."""

    id: str | None = None
    question: str
    request_id: str
    thread_id: str | None = None
    outcome: Outcome
    route: Route | None = None
    refusal: Refusal | None = None
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    #: Entries offered instead of an answer (outcome "choices"), the reranker's best first.
    choices: list[Choice] = Field(default_factory=list)
    #: Parts of a several-part question the KB has no answer to (the answer says so too).
    uncovered: list[str] = Field(default_factory=list)
    confidence: float = 0.0
    trail: list[Decision] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = 0.0
