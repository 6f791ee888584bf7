"""The /v1 routes of guardrag's own API: ask, ask as a stream of events, list KBs, read the
audit. Every answered request is audited before it is answered (`ensure_audited`)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from guardrag.contract import Result
from guardrag.core.audit import AuditRecord, AuditUnavailable, SqlAuditStore, open_audit_store
from guardrag.core.audit.sink import default_audit_url
from guardrag.faces.api.auth import Caller, caller_of
from guardrag.faces.api.bodies import NOT_FOUND, AskRequest, ErrorBody, KBName
from guardrag.faces.api.middleware import request_id
from guardrag.faces.api.stream import SSEResponse, pump, sse
from guardrag.faces.asking import Asked, Progress, ask_with_progress, ensure_audited
from guardrag.faces.sentences import Sentence, continuation
from guardrag.faces.service import Guardrag
from guardrag.faces.views import KBSummary, RecentResults, answer_chunks, kb_summaries

log = logging.getLogger("guardrag.api")

# OpenAPI 3.2's itemSchema for an event stream, as FastAPI writes it for its own SSE routes.
SSE_DOC: dict[str, Any] = {
    "description": '`progress` events (data `{"node", "verdict", "stage", "label"}`) as the '
    'pipeline runs; while the model writes, `sentence` events (data `{"index", "text"}`), each '
    "a sentence of the draft that passed the grounding and output checks on its own (the draft's "
    "citation numbers; the `final` result decides: it may renumber, leave a remark out or "
    'refuse the draft as a whole); then `token` events (data `{"text": ...}`) of the checked '
    "answer, then one `final` event (the result); an `error` event instead when the request "
    "fails after the stream began.",
    "content": {
        "text/event-stream": {
            "itemSchema": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {
                        "type": "string",
                        "enum": ["progress", "sentence", "token", "final", "error"],
                    },
                    "data": {"type": "string", "contentMediaType": "application/json"},
                    "id": {"type": "string"},
                },
            }
        }
    },
}


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


def require_kb(bot: Guardrag, kb: str) -> None:
    """404 naming `kb` when no such knowledge base is published. An index that cannot be read
    is left to the pipeline, which refuses with a typed `index_unavailable`."""
    try:
        info = bot.services.store.kb_info(kb)
    except Exception:
        return
    if info is None:
        raise HTTPException(404, f"knowledge base {kb!r} does not exist")


def admit(
    bot: Guardrag, caller: Caller, kb: str | None, thread_id: str | None
) -> tuple[str, str | None]:
    """The KB a request may ask (403 outside the key's scope, 404 when it does not exist) and
    its thread in the key's own namespace."""
    name = kb or bot.settings.default_kb
    caller.require(name)
    require_kb(bot, name)
    return name, (f"{caller.space}.{thread_id}" if thread_id else None)


def finish(bot: Guardrag, recent: RecentResults, result: Result, kb: str = "") -> None:
    """What every answered request goes through: kept (with its KB) for the Audit tab, and
    audited (or AuditUnavailable, which the app answers 503)."""
    recent.add(result, kb)
    ensure_audited(bot, result)


def result_events(result: Result, shown: list[str] | None = None) -> list[bytes]:
    """`token` events with the answer in pieces, then one `final` event with the whole result;
    after `shown` sentences, the final event also says whether they were `withdrawn` (the
    answer does not continue them: a later check failed, or it was refused)."""
    tokens = [sse("token", json.dumps({"text": piece})) for piece in answer_chunks(result.answer)]
    final = result.model_dump_json()
    if shown:
        _, withdrawn = continuation(" ".join(shown), result.answer)
        final = json.dumps({**json.loads(final), "withdrawn": withdrawn})
    return [*tokens, sse("final", final, result.request_id)]


async def stream_events(
    bot: Guardrag, recent: RecentResults, body: AskRequest, kb: str, thread: str | None, rid: str
) -> AsyncIterator[bytes]:
    """The events of /v1/ask/stream: progress, verified sentences, then the checked answer
    and the final result (or an error event)."""

    def work(emit: Any) -> Asked:
        return ask_with_progress(
            bot, body.question, kb, thread_id=thread, on_progress=emit, on_sentence=emit
        )

    shown: list[str] = []
    async for item in pump(work):
        if isinstance(item, Progress):
            yield sse("progress", item.model_dump_json())
            continue
        if isinstance(item, Sentence):
            shown.append(item.text)
            yield sse("sentence", item.model_dump_json())
            continue
        if isinstance(item, BaseException):
            log.error("stream failed (request %s)", rid, exc_info=item)
            yield sse(
                "error",
                ErrorBody(detail="internal error", request_id=rid).model_dump_json(),
            )
            return
        result = item.result.model_copy(update={"thread_id": body.thread_id})
        try:
            await run_in_threadpool(finish, bot, recent, item.result, kb)
        except AuditUnavailable as exc:
            yield sse("error", ErrorBody(detail=str(exc), request_id=rid).model_dump_json())
            return
        for event in result_events(result, shown):
            yield event


def ask_router(bot: Guardrag, recent: RecentResults) -> APIRouter:
    """/v1/ask, /v1/ask/stream, /v1/kbs and /v1/audit (auth and limits come from the caller)."""
    settings = bot.settings
    router = APIRouter()
    audit = AuditReader(default_audit_url(settings)) if bot.audit is not None else None

    @router.post(
        "/ask",
        response_model=Result,
        responses=NOT_FOUND,
        summary="Answer a question, or refuse it",
    )
    def ask_json(body: AskRequest, request: Request) -> Result:
        """The full result object: answer, citations, route or typed refusal, decision trail."""
        kb, thread = admit(bot, caller_of(request), body.kb, body.thread_id)
        result = bot.ask(body.question, kb, thread_id=thread)
        finish(bot, recent, result, kb)
        return result.model_copy(update={"thread_id": body.thread_id})

    @router.post(
        "/ask/stream",
        # StreamingResponse documents no body of its own; SSE_DOC describes the events.
        response_class=StreamingResponse,
        responses={200: SSE_DOC, **NOT_FOUND},
        summary="Answer a question as server-sent events, with progress",
    )
    async def ask_stream(body: AskRequest, request: Request) -> SSEResponse:
        """`progress` events while the pipeline runs (guards passed, searching, drafting,
        verifying), `sentence` events as each sentence of a generated draft passes grounding
        and the output checks, then the checked answer as `token` events and one `final`
        event with the full result object. Nothing unchecked is ever sent."""
        kb, thread = admit(bot, caller_of(request), body.kb, body.thread_id)
        rid = request_id(request.scope)

        return SSEResponse(stream_events(bot, recent, body, kb, thread, rid))

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
        kb: Annotated[KBName | None, Query()] = None,
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
