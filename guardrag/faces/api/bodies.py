"""Request and response bodies of the HTTP API, and the errors its spec documents."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from guardrag.config.settings import KB_NAME_PATTERN, validate_kb_name
from guardrag.faces.threads import THREAD_PATTERN

#: A knowledge base name in a body or query: one rule and one message everywhere (the spec
#: carries the pattern; the check is validate_kb_name, as in the CLI and the UI).
KBName = Annotated[
    str, AfterValidator(validate_kb_name), Field(json_schema_extra={"pattern": KB_NAME_PATTERN})
]


class AskRequest(BaseModel):
    """A question for one knowledge base (the default one when `kb` is omitted)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The user's question, as typed.")
    kb: KBName | None = Field(None, description="Knowledge base name; default GUARDRAG_DEFAULT_KB.")
    thread_id: str | None = Field(
        None,
        pattern=THREAD_PATTERN,
        description="Conversation id of your choice: a follow-up is understood from the earlier "
        "turns of the same thread (each API key has its own threads).",
    )


class ErrorBody(BaseModel):
    detail: str
    request_id: str | None = None


class Problem(BaseModel):
    """One reason a request body was refused: where (`loc`) and why (`msg`)."""

    loc: list[str | int]
    msg: str
    type: str


class InvalidBody(BaseModel):
    """422: the body is JSON but not a request this endpoint takes (the input is not echoed)."""

    detail: list[Problem]
    request_id: str | None = None


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, bool]
    kbs: list[str] = Field(
        default_factory=list, description="The knowledge bases this process serves now."
    )


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body is not JSON (or not UTF-8)."},
    401: {"model": ErrorBody, "description": "Missing or wrong X-API-Key, or a key in the URL."},
    403: {"model": ErrorBody, "description": "This key may not use that knowledge base."},
    413: {"model": ErrorBody, "description": "Request body too large."},
    415: {"model": ErrorBody, "description": "The body is not declared as application/json."},
    422: {
        "model": InvalidBody,
        "description": "JSON that is not a valid request: a missing or unknown field, a bad "
        "name, or text that cannot be represented (lone surrogates, NaN, nesting too deep).",
    },
    429: {"model": ErrorBody, "description": "Rate limit hit; see the Retry-After header."},
    500: {"model": ErrorBody, "description": "Unexpected error; quote the request id."},
    503: {
        "model": ErrorBody,
        "description": "The audit log cannot record the request, so it is not answered.",
    },
}
#: Added to routes that name a knowledge base.
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No knowledge base of that name."}
}
