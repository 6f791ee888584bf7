"""ASGI middleware of the API: request ids, the body gate (size, JSON that can be represented),
no credentials in URLs, and access-log lines with such credentials scrubbed.

Everything here runs before FastAPI parses a body, so what cannot be represented (a lone
UTF-16 surrogate, NaN, JSON nested beyond reason) is refused before the pipeline ever runs:
it could not be audited faithfully, and FastAPI's own 422 would fail to echo it (HTTP 500).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi.responses import JSONResponse

from guardrag.faces.api.bodies import ErrorBody, InvalidBody, Problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

API_PREFIX = "/v1"
UI_PATH = "/ui"
#: Deepest nesting of objects and arrays a request body may have (ours nest 3 levels).
MAX_BODY_DEPTH = 32
#: Query parameters that carry credentials: refused, and scrubbed from the access log.
CREDENTIAL_PARAMS = frozenset(
    {"api_key", "apikey", "api-key", "x-api-key", "key", "token", "access_token", "admin_token"}
)
#: A lone UTF-16 surrogate: JSON can escape one ("\ud800"), but no UTF-8 text can hold it.
_UNREPRESENTABLE = re.compile("[\ud800-\udfff]")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def request_id(scope: Scope) -> str:
    """This request's id (made on first use): X-Request-ID, logs and error bodies carry it."""
    state = scope.setdefault("state", {})
    return str(state.setdefault("request_id", uuid.uuid4().hex))


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


async def answer(scope: Scope, send: Send, status: int, body: ErrorBody | InvalidBody) -> None:
    """Send a JSON error without running the app (the body carries the request id)."""
    body.request_id = request_id(scope)
    await JSONResponse(body.model_dump(), status_code=status)(scope, _no_body, send)


class RequestIdMiddleware:
    """Gives every HTTP request an id (X-Request-ID on the response, in logs and 500 bodies)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            await send(message)

        await self.app(scope, receive, send_with_id)


def credential_in_query(query: bytes | str) -> bool:
    text = query.decode("latin-1") if isinstance(query, bytes) else query
    return any(name.lower() in CREDENTIAL_PARAMS for name, _ in parse_qsl(text, True))


class NoKeysInURLMiddleware:
    """401 for a request carrying a credential in its query string (outside the UI): keys go
    in the X-API-Key header only, because URLs end up in logs, proxies and browser history."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and not scope["path"].startswith(UI_PATH)
            and credential_in_query(scope.get("query_string", b""))
        ):
            detail = "send the API key in the X-API-Key header, never in the URL"
            await answer(scope, send, 401, ErrorBody(detail=detail))
            return
        await self.app(scope, receive, send)


def body_problem(body: bytes) -> tuple[int, str] | None:
    """(status, why) for a request body that is not a JSON document we can represent: 400
    when it cannot be decoded at all, 422 when it decodes to something no text can hold."""
    if not body.strip():
        return 400, "the body is empty: send a JSON object"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return 400, f"the body is not UTF-8 text (invalid byte at offset {exc.start})"

    def no_constants(name: str) -> Any:
        raise _Unrepresentable(f"{name} is not a JSON number")

    try:
        data = json.loads(text, parse_constant=no_constants)
    except _Unrepresentable as exc:
        return 422, str(exc)
    except json.JSONDecodeError as exc:
        return (
            400,
            f"the body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
        )
    except RecursionError:
        return 422, f"the body nests deeper than {MAX_BODY_DEPTH} levels"
    return _walk(data)


class _Unrepresentable(ValueError):
    pass


def _walk(data: Any) -> tuple[int, str] | None:
    """Nesting depth and text of every key and value, without recursion."""
    stack: list[tuple[Any, int, str]] = [(data, 1, "body")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_BODY_DEPTH:
                return 422, f"the body nests deeper than {MAX_BODY_DEPTH} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, value in pairs:
                if isinstance(key, str) and _UNREPRESENTABLE.search(key):
                    return 422, f"a key in {where} is not valid Unicode text"
                stack.append((value, depth + 1, f"{where}.{key}"[:80]))
        elif isinstance(item, str) and (bad := _UNREPRESENTABLE.search(item)):
            return 422, (
                f"{where} is not valid Unicode text (a lone UTF-16 surrogate at character "
                f"{bad.start()})"
            )
    return None


class BodyGateMiddleware:
    """For requests under `prefix`: 413 for bodies over `limit` bytes (declared or streamed),
    and for bodies that must be JSON, 400 or 422 unless they are JSON we can represent.

    The body is buffered (it is small by construction), so a lying or absent Content-Length
    cannot get a bigger body through. The mounted UI keeps Gradio's own limits.
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
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._too_large(scope, send)
                return
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        if scope["method"] in _BODY_METHODS and (declared_type := not_json_type(scope)):
            detail = (
                f"send the body as JSON with 'Content-Type: application/json' "
                f"(this request said {declared_type!r})"
            )
            await answer(scope, send, 415, ErrorBody(detail=detail))
            return
        if scope["method"] in _BODY_METHODS and (problem := body_problem(body)):
            status, why = problem
            if status == 400:
                await answer(scope, send, 400, ErrorBody(detail=why))
            else:
                problems = [Problem(loc=["body"], msg=why, type="value_error")]
                await answer(scope, send, 422, InvalidBody(detail=problems))
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        detail = f"request body too large (limit {self.limit} bytes)"
        await answer(scope, send, 413, ErrorBody(detail=detail))


def not_json_type(scope: Scope) -> str | None:
    """The request's declared content type when it is not JSON (None when it is JSON or not
    declared). Such a body is refused, not guessed at: a cross-site page can send text/plain
    or a form without a preflight, but never application/json."""
    declared = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1").strip()
    media = declared.split(";", 1)[0].strip().lower()
    if not media or media == "application/json" or media.endswith("+json"):
        return None
    return declared[:100]


def scrub_url(text: str) -> str:
    """`text` with the value of every credential parameter of its query string replaced."""
    path, sep, query = text.partition("?")
    if not sep:
        return text
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(name.lower() in CREDENTIAL_PARAMS for name, _ in pairs):
        return text
    clean = [(n, "[redacted]" if n.lower() in CREDENTIAL_PARAMS else v) for n, v in pairs]
    return f"{path}?{urlencode(clean, safe='[]')}"


class ScrubCredentials(logging.Filter):
    """Keeps credentials sent in a URL out of uvicorn's access log (the request itself is
    refused by NoKeysInURLMiddleware, but the line is written whatever the status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(scrub_url(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = scrub_url(record.msg) if "?" in record.msg else record.msg
        return True


def scrub_access_log(logger_name: str = "uvicorn.access") -> None:
    """Attach ScrubCredentials to the access logger once per process."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, ScrubCredentials) for f in logger.filters):
        logger.addFilter(ScrubCredentials())
