"""An OpenAI-compatible face: POST /v1/chat/completions and GET /v1/models, so chat front-ends
and SDKs that speak OpenAI's API can use guardrag unchanged, behind the same keys, scopes,
rate limits and audit as /v1/ask.

Each knowledge base the key may use is one model (its id is the KB name). The answer is the
assistant message, with its citations as numbered links; a refusal is an ordinary assistant
message too (never an HTTP error), and the full guardrag result (route, citations, refusal,
trail, request id) travels in the `guardrag` extension field of the completion (and of the last
chunk when streaming). System and developer messages are ignored: clients cannot change how
guardrag answers. Earlier user/assistant turns in `messages` become the thread's history, so
a follow-up is rewritten into a standalone question exactly as in a /v1/ask thread.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from guardrag.config.settings import validate_kb_name
from guardrag.contract import Result
from guardrag.core.audit import AuditUnavailable
from guardrag.core.choices import offered_in
from guardrag.faces.api.ask import admit, finish
from guardrag.faces.api.auth import Caller, caller_of
from guardrag.faces.api.bodies import NOT_FOUND
from guardrag.faces.api.middleware import request_id
from guardrag.faces.api.stream import SSEResponse, pump
from guardrag.faces.asking import Asked, Progress, ask_with_progress
from guardrag.faces.sentences import Sentence, continuation
from guardrag.faces.service import Guardrag
from guardrag.faces.views import RecentResults, answer_chunks, citation_lines, kb_summaries

log = logging.getLogger("guardrag.api")

#: Where our own citations start in an assistant message (cut off when it comes back as
#: history: the thread remembers answers, not link lists).
SOURCES_HEADER = "\n\nSources:\n"
#: Turns of `messages` handed to the thread (it keeps five anyway).
HISTORY_TURNS = 5


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type == "text" and p.text)
        return self.content or ""


class ChatRequest(BaseModel):
    """OpenAI's chat-completion request; sampling options (temperature, top_p, ...) are
    accepted and ignored, because guardrag's answers do not depend on them."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="A knowledge base name, as listed by GET /v1/models.")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None


class GuardragExtension(Result):
    """The full guardrag result, plus the questions of the entries offered instead of an
    answer."""

    suggestions: list[str] = Field(
        default_factory=list,
        description="Outcome `choices`: the offered FAQ entries' questions, best first; ask one "
        "(or reply with its number in the same thread) to read its answer.",
    )
    withdrawn: bool = Field(
        False,
        description="Streaming only: verified sentences were sent while the model wrote, but "
        "the whole answer then failed a final check; the content says so and gives the reply.",
    )


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"


class CompletionUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    guardrag: GuardragExtension = Field(
        description="guardrag's own result: route, citations, refusal (reason, stage, kind), "
        "decision trail, request id; `suggestions` after a not-found refusal."
    )


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "guardrag"
    description: str = ""


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


def split_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The question (the last message when it is the user's; else none, which the pipeline
    refuses `empty_input` like any empty question) and the earlier (question, answer) turns
    of the conversation, oldest first, with the entries an answer offered (so "2" picks one)."""
    turns: list[dict[str, Any]] = []
    asked: str | None = None
    for message in messages[:-1]:
        if message.role == "user":
            asked = message.text()
        elif message.role == "assistant" and asked is not None:
            answer = message.text().split(SOURCES_HEADER, 1)[0]
            turns.append({"question": asked, "answer": answer, "choices": offered_in(answer)})
            asked = None
    question = messages[-1].text() if messages[-1].role == "user" else ""
    return question, turns[-HISTORY_TURNS:]


def content_of(result: Result) -> str:
    """The assistant message: the answer (or the refusal's message) and numbered sources."""
    lines = citation_lines(result)
    return result.answer + (SOURCES_HEADER + "\n".join(lines) if lines else "")


def extension(asked: Asked) -> GuardragExtension:
    result = asked.result
    return GuardragExtension(**result.model_dump(), suggestions=asked.suggestions())


def _usage(result: Result) -> CompletionUsage:
    used = result.usage
    total = used.prompt_tokens + used.completion_tokens
    return CompletionUsage(
        prompt_tokens=used.prompt_tokens,
        completion_tokens=used.completion_tokens,
        total_tokens=total,
    )


def _created(updated_at: str) -> int:
    try:
        return int(datetime.fromisoformat(updated_at).timestamp())
    except ValueError:
        return 0


def _chunk(completion_id: str, model: str, delta: dict[str, Any], **extra: Any) -> bytes:
    body = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": extra.pop("finish", None)}],
        **extra,
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


def kb_of(model: str) -> str:
    try:
        name = validate_kb_name(model)
    except ValueError:
        raise HTTPException(404, f"model {model[:70]!r} does not exist") from None
    return name


def prepared(bot: Guardrag, body: ChatRequest, caller: Caller) -> tuple[str, str, str | None]:
    """(KB, question, thread seeded with the earlier turns of `messages`, or None)."""
    question, turns = split_messages(body.messages)
    kb, _ = admit(bot, caller, kb_of(body.model), None)
    if not turns:
        return kb, question, None
    thread = f"{caller.space}.chat-{uuid.uuid4().hex}"
    config: Any = {"configurable": {"thread_id": thread}}
    bot.threads.graph.update_state(config, {"history": turns}, as_node="respond")
    return kb, question, thread


def run(
    bot: Guardrag,
    kb: str,
    question: str,
    thread: str | None,
    emit: Any = None,
    sentences: Any = None,
) -> Asked:
    try:
        return ask_with_progress(
            bot, question, kb, thread_id=thread, on_progress=emit, on_sentence=sentences
        )
    finally:
        if thread is not None:  # the conversation lives in the client's `messages`
            bot.threads.forget(thread)


async def _stream(
    bot: Guardrag,
    recent: RecentResults,
    body: ChatRequest,
    kb: str,
    question: str,
    thread: str | None,
    request: Request,
) -> AsyncIterator[bytes]:
    """Progress as SSE comments (clients skip them; they keep the line alive), then the
    checked answer in pieces, a last chunk carrying the `guardrag` result, and [DONE]."""
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    yield _chunk(completion_id, kb, {"role": "assistant", "content": ""})
    shown = ""
    async for item in pump(lambda emit: run(bot, kb, question, thread, emit, emit)):
        if isinstance(item, Progress):
            yield f": {item.stage} {item.label}\n\n".encode()
            continue
        if isinstance(item, Sentence):  # verified on its own while the model writes
            piece = f" {item.text}" if shown else item.text
            shown += piece
            yield _chunk(completion_id, kb, {"content": piece})
            continue
        if isinstance(item, BaseException):
            rid = request_id(request.scope)
            log.error("chat stream failed (request %s)", rid, exc_info=item)
            error = {"message": f"internal error (request {rid})", "type": "server_error"}
            yield f"data: {json.dumps({'error': error})}\n\n".encode()
            return
        try:
            await run_in_threadpool(finish, bot, recent, item.result, kb)
        except AuditUnavailable as exc:
            error = {"message": str(exc), "type": "server_error", "code": "audit_unavailable"}
            yield f"data: {json.dumps({'error': error})}\n\n".encode()
            return
        rest, withdrawn = continuation(shown, content_of(item.result))
        for piece in answer_chunks(rest):
            yield _chunk(completion_id, kb, {"content": piece})
        final = extension(item).model_copy(update={"withdrawn": withdrawn})
        extra: dict[str, Any] = {"guardrag": final.model_dump(mode="json")}
        yield _chunk(completion_id, kb, {}, finish="stop", **extra)
        if (body.stream_options or {}).get("include_usage"):
            usage = _usage(item.result).model_dump()
            tail: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk"}
            tail |= {"model": kb, "created": int(time.time()), "choices": [], "usage": usage}
            yield f"data: {json.dumps(tail)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def openai_router(bot: Guardrag, recent: RecentResults) -> APIRouter:
    """/v1/chat/completions, /v1/models and /v1/models/{model}."""
    router = APIRouter(tags=["OpenAI-compatible"])

    @router.post(
        "/chat/completions",
        response_model=ChatCompletion,
        responses={
            **NOT_FOUND,
            200: {
                "content": {"text/event-stream": {}},
                "description": "A chat completion, or with `stream: true` its chunks as "
                "server-sent events ending in `data: [DONE]`.",
            },
        },
        summary="OpenAI-compatible chat completion over a knowledge base",
    )
    async def chat_completions(body: ChatRequest, request: Request) -> Any:
        """The last user message is the question; earlier turns are the conversation. A
        refusal is an ordinary assistant message; see the `guardrag` field for the reason."""
        caller = caller_of(request)
        kb, question, thread = await run_in_threadpool(prepared, bot, body, caller)
        if body.stream:
            return SSEResponse(_stream(bot, recent, body, kb, question, thread, request))
        asked = await run_in_threadpool(run, bot, kb, question, thread)
        await run_in_threadpool(finish, bot, recent, asked.result, kb)
        result = asked.result
        return ChatCompletion(
            id=f"chatcmpl-{result.request_id}",
            created=int(time.time()),
            model=kb,
            choices=[Choice(message=AssistantMessage(content=content_of(result)))],
            usage=_usage(result),
            guardrag=extension(asked),
        )

    @router.get("/models", response_model=ModelList, summary="Knowledge bases as models")
    def models(request: Request) -> ModelList:
        """One model per knowledge base this key may use; its id is the KB name."""
        summaries = kb_summaries(bot.services.store, caller_of(request).kbs)
        return ModelList(
            data=[
                Model(id=s.name, created=_created(s.updated_at), description=s.description)
                for s in summaries
            ]
        )

    @router.get("/models/{model}", response_model=Model, responses=NOT_FOUND, summary="One model")
    def model(model: str, request: Request) -> Model:
        caller = caller_of(request)
        kb, _ = admit(bot, caller, kb_of(model), None)
        for summary in kb_summaries(bot.services.store, frozenset({kb})):
            return Model(
                id=kb, created=_created(summary.updated_at), description=summary.description
            )
        raise HTTPException(404, f"model {kb!r} does not exist")

    return router
