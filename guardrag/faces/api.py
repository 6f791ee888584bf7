"""The HTTP API (FastAPI) with the Gradio app mounted at /ui, over one Guardrag per process.

One process builds one Guardrag (the embedded Qdrant shard is locked per process), so the API
and the UI share it, and the recent results the Audit tab shows.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.security import APIKeyHeader
from fastapi.sse import format_sse_event
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import StreamingResponse

from guardrag.config.settings import KeyScopes
from guardrag.contract import Result
from guardrag.core import metrics
from guardrag.core.audit import AuditRecord, SqlAuditStore, open_audit_store
from guardrag.core.audit.sink import default_audit_url
from guardrag.faces.ratelimit import RateLimiter
from guardrag.faces.service import Guardrag
from guardrag.faces.threads import THREAD_PATTERN
from guardrag.faces.views import KBSummary, RecentResults, answer_chunks, kb_summaries

log = logging.getLogger("guardrag.api")

KB_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
UI_PATH = "/ui"
API_PREFIX = "/v1"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# --- request / response bodies ------------------------------------------------------------


class AskRequest(BaseModel):
    """A question for one knowledge base (the default one when `kb` is omitted)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="The user's question, as typed.")
    kb: str | None = Field(
        None, pattern=KB_PATTERN, description="Knowledge base name; default GUARDRAG_DEFAULT_KB."
    )
    thread_id: str | None = Field(
        None,
        pattern=THREAD_PATTERN,
        description="Conversation id of your choice: a follow-up is understood from the earlier "
        "turns of the same thread (each API key has its own threads).",
    )


class ErrorBody(BaseModel):
    detail: str
    request_id: str | None = None


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, bool]


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body cannot be decoded."},
    401: {"model": ErrorBody, "description": "Missing or wrong X-API-Key."},
    403: {"model": ErrorBody, "description": "This key may not use that knowledge base."},
    413: {"model": ErrorBody, "description": "Request body too large."},
    429: {"model": ErrorBody, "description": "Rate limit hit; see the Retry-After header."},
    500: {"model": ErrorBody, "description": "Unexpected error; quote the request id."},
}


# OpenAPI 3.2's itemSchema for an event stream, as FastAPI writes it for its own SSE routes.
_SSE_DOC: dict[str, Any] = {
    "description": '`token` events (data `{"text": ...}`), then one `final` event (the result).',
    "content": {
        "text/event-stream": {
            "itemSchema": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"type": "string", "enum": ["token", "final"]},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                    "id": {"type": "string"},
                },
            }
        }
    },
}


# --- middleware ---------------------------------------------------------------------------


def _request_id(scope: Scope) -> str:
    state = scope.setdefault("state", {})
    return str(state.setdefault("request_id", uuid.uuid4().hex))


class RequestIdMiddleware:
    """Gives every HTTP request an id (X-Request-ID on the response, in logs and 500 bodies)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", request_id.encode()),
                ]
            await send(message)

        await self.app(scope, receive, send_with_id)


class BodyLimitMiddleware:
    """413 for request bodies over `limit` bytes under `prefix`, declared or streamed.

    The body is buffered (it is small by construction) so a lying or absent Content-Length
    cannot get a bigger body through. The mounted UI keeps Gradio's own upload limit.
    """

    def __init__(self, app: ASGIApp, limit: int, prefix: str = API_PREFIX) -> None:
        self.app = app
        self.limit = limit
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._too_large(scope, send)
            return
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._too_large(scope, send)
                return
            if message["type"] != "http.request" or not message.get("more_body"):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        body = ErrorBody(
            detail=f"request body too large (limit {self.limit} bytes)",
            request_id=_request_id(scope),
        )
        await JSONResponse(body.model_dump(), status_code=413)(scope, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


class SSEResponse(StreamingResponse):
    """A text/event-stream response whose events are ready before it starts.

    Not FastAPI's EventSourceResponse: that one makes the endpoint a generator, which would
    run the pipeline after the 200 has gone out, so a failure could no longer be a clean 500.
    """

    media_type = "text/event-stream"


# --- dependencies -------------------------------------------------------------------------


def rate_limit_dependency(limiter: RateLimiter) -> Callable[[Request], None]:
    """A dependency that takes a token for the calling client or answers 429 + Retry-After."""

    def enforce(request: Request) -> None:
        # The peer address; uvicorn rewrites it from X-Forwarded-For only for trusted proxies.
        client = request.client.host if request.client else "unknown"
        wait = limiter.acquire(client)
        if wait > 0:
            raise HTTPException(
                429, "rate limit exceeded", headers={"Retry-After": str(math.ceil(wait))}
            )

    return enforce


_API_KEY_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False)


@dataclass(frozen=True)
class Caller:
    """What the calling key may see: these knowledge bases, or every one (None)."""

    kbs: frozenset[str] | None = None
    keyed: bool = False  # False: no keys are configured, the API is open
    space: str = "open"  # whose conversations: a key's threads are invisible to other keys

    def allows(self, kb: str) -> bool:
        return self.kbs is None or kb in self.kbs

    def require(self, kb: str) -> None:
        """403 for a KB outside the key's scope, whether or not that KB exists."""
        if not self.allows(kb):
            raise HTTPException(403, f"this API key may not use knowledge base {kb!r}")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def key_checker(scopes: KeyScopes) -> Callable[[str | None], Caller]:
    """Finds the sent key among `scopes` in constant time: every key is compared (as a SHA-256
    digest, so neither its length nor its position leaks through timing), and a match does
    not stop the loop. 401 for a missing or unknown key; without keys the API is open."""
    table = [(_digest(key), kbs) for key, kbs in scopes.items()]

    def check(given: str | None) -> Caller:
        if not table:
            return Caller()
        sent = _digest(given or "")
        found: Caller | None = None
        for digest, kbs in table:
            if hmac.compare_digest(sent, digest) and given is not None:
                found = Caller(kbs, keyed=True, space=f"key-{digest.hex()[:12]}")
        if found is None:
            # Never echo or log the key that was sent.
            raise HTTPException(401, "missing or invalid API key")
        return found

    return check


def key_dependency(scopes: KeyScopes) -> Callable[[Request, str | None], None]:
    """A router dependency that authenticates X-API-Key and leaves the Caller on the request."""
    check = key_checker(scopes)

    def authenticate(
        request: Request, given: Annotated[str | None, Depends(_API_KEY_HEADER)]
    ) -> None:
        request.state.caller = check(given)

    return authenticate


def caller_of(request: Request) -> Caller:
    """The Caller the key dependency found (an open API's when no key is configured)."""
    caller = getattr(request.state, "caller", None)
    return caller if isinstance(caller, Caller) else Caller()


class AuditReader:
    """Reads the audit log for GET /v1/audit (opened on first use, shared by the workers)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._store: SqlAuditStore | None = None
        self._lock = threading.Lock()

    def recent(self, kbs: list[str] | None, limit: int) -> list[AuditRecord]:
        with self._lock:
            if self._store is None:
                self._store = open_audit_store(self.url)
            store = self._store
        return store.recent(kbs, limit)


# --- the application ----------------------------------------------------------------------


def sse_events(result: Result) -> Iterator[bytes]:
    """`token` events with the answer in pieces, then one `final` event with the whole result."""
    for piece in answer_chunks(result.answer):
        yield format_sse_event(data_str=json.dumps({"text": piece}), event="token")
    yield format_sse_event(data_str=result.model_dump_json(), event="final", id=result.request_id)


def readiness(bot: Guardrag) -> dict[str, bool]:
    """Whether the embedding model answers and the default KB's index is open."""
    checks = {}
    for name, probe in (
        ("models", lambda: len(bot.services.embedder.embed(["ready?"])) == 1),
        ("index", lambda: bot.services.store.kb_info(bot.settings.default_kb) is not None),
    ):
        try:
            checks[name] = bool(probe())
        except Exception:
            log.exception("readiness check %s failed", name)
            checks[name] = False
    return checks


def _api_router(bot: Guardrag, recent: RecentResults, limiter: RateLimiter) -> APIRouter:
    settings = bot.settings
    scopes = settings.key_scopes()
    # Rate limit first, so guessing keys is rate limited too. Without a configured key the
    # key check is left out altogether, so the OpenAPI spec does not claim one is needed.
    dependencies = [Depends(rate_limit_dependency(limiter))]
    if scopes:
        dependencies.append(Depends(key_dependency(scopes)))
    router = APIRouter(prefix=API_PREFIX, dependencies=dependencies, responses=_ERRORS)
    audit = AuditReader(default_audit_url(settings)) if bot.audit is not None else None

    def ask(body: AskRequest, request: Request) -> Result:
        caller = caller_of(request)
        caller.require(body.kb or settings.default_kb)
        thread = f"{caller.space}.{body.thread_id}" if body.thread_id else None
        result = bot.ask(body.question, body.kb, thread_id=thread)
        recent.add(result)
        return result.model_copy(update={"thread_id": body.thread_id})

    @router.post("/ask", response_model=Result, summary="Answer a question, or refuse it")
    def ask_json(body: AskRequest, request: Request) -> Result:
        """The full result object: answer, citations, route or typed refusal, decision trail."""
        return ask(body, request)

    @router.post(
        "/ask/stream",
        # StreamingResponse documents no body of its own; _SSE_DOC describes the events.
        response_class=StreamingResponse,
        responses={200: _SSE_DOC},
        summary="Answer a question as server-sent events",
    )
    def ask_stream(body: AskRequest, request: Request) -> SSEResponse:
        """Runs the whole pipeline (guards included) first, then streams `token` events
        (`{"text": ...}`) and one `final` event carrying the full result object."""
        return SSEResponse(sse_events(ask(body, request)))

    @router.get("/kbs", response_model=list[KBSummary], summary="List knowledge bases")
    def kbs(request: Request) -> list[KBSummary]:
        """The knowledge bases this key may use."""
        return kb_summaries(bot.services.store, caller_of(request).kbs)

    @router.get(
        "/audit",
        response_model=list[AuditRecord],
        responses={404: {"model": ErrorBody, "description": "The audit log is off."}},
        summary="Recent audit records of this key's knowledge bases",
    )
    def audit_log(
        request: Request,
        kb: Annotated[str | None, Query(pattern=KB_PATTERN)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> list[AuditRecord]:
        """Newest first, already redacted; one KB with `kb`, else every KB the key may use.
        Needs a key (GUARDRAG_API_KEY or GUARDRAG_API_KEYS): an open API shows no audit."""
        caller = caller_of(request)
        if not caller.keyed:
            raise HTTPException(403, "the audit log needs an API key (GUARDRAG_API_KEYS)")
        if audit is None:
            raise HTTPException(404, "the audit log is off for this process")
        if kb is not None:
            caller.require(kb)
        kbs = [kb] if kb is not None else (sorted(caller.kbs) if caller.kbs is not None else None)
        return audit.recent(kbs, limit)

    return router


def _add_probes(app: FastAPI, bot: Guardrag) -> None:
    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    def metrics_text() -> PlainTextResponse:
        stats = bot.audit.stats if bot.audit else None
        return PlainTextResponse(metrics.exposition(stats), media_type=CONTENT_TYPE_LATEST)

    @app.get("/health", response_model=Health, summary="Liveness")
    def health() -> Health:
        return Health()

    @app.get(
        "/ready",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Not ready yet."}},
        summary="Readiness: models loaded, index open",
    )
    def ready() -> JSONResponse:
        checks = readiness(bot)
        ok = all(checks.values())
        body = Readiness(status="ready" if ok else "not_ready", checks=checks)
        return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    request_id = _request_id(request.scope)
    log.error("unhandled error (request %s)", request_id, exc_info=exc)
    body = ErrorBody(detail="internal error", request_id=request_id)
    return JSONResponse(body.model_dump(), status_code=500, headers={"X-Request-ID": request_id})


def _version() -> str:
    try:
        return version("guardrag")
    except PackageNotFoundError:
        return "0.0.0"


def create_app(
    bot: Guardrag,
    *,
    recent: RecentResults | None = None,
    limiter: RateLimiter | None = None,
    with_ui: bool = True,
) -> FastAPI:
    """The API over `bot` (its settings decide key, limits and CORS), with the UI at /ui."""
    settings = bot.settings
    recent = recent or RecentResults(settings.recent_results)
    limiter = limiter or RateLimiter(settings.rate_limit_per_minute / 60, settings.rate_limit_burst)
    app = FastAPI(
        title="guardrag",
        version=_version(),
        description="Answers questions only from a verified knowledge base; refuses the rest.",
    )
    app.include_router(_api_router(bot, recent, limiter))
    _add_probes(app, bot)
    app.add_exception_handler(Exception, _internal_error)
    # add_middleware wraps: the last added runs first.
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_request_bytes)
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:  # CORS stays off unless origins are configured
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "X-API-Key"],
        )
    app.add_middleware(RequestIdMiddleware)
    if with_ui:
        _mount_ui(app, bot, recent)
    return app


def _mount_ui(app: FastAPI, bot: Guardrag, recent: RecentResults) -> None:
    # lazy: Gradio takes seconds to import; an API without the UI never pays for it
    import gradio as gr

    from guardrag.faces.ui import CSS, build_app  # lazy: with Gradio

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse(f"{UI_PATH}/")

    gr.mount_gradio_app(
        app,
        build_app(bot, recent=recent),
        path=UI_PATH,
        max_file_size=bot.settings.upload_max_bytes,
        show_error=False,
        css=CSS,
    )
