"""A tiny OpenAI-compatible HTTP server on 127.0.0.1 for tests: real HTTP, scripted replies.

Besides status codes and delays it can misbehave the ways real endpoints do (`fault`):
a 200 with a body that is not JSON, a body cut short of its Content-Length, no choices,
a null message, or a server-sent-event stream whose connection drops mid-answer.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Fault = Literal["malformed_json", "truncated_body", "empty_choices", "null_content", "cut_stream"]
FAULTS: tuple[Fault, ...] = (
    "malformed_json",
    "truncated_body",
    "empty_choices",
    "null_content",
    "cut_stream",
)


class QuietServer(ThreadingHTTPServer):
    """A threaded loopback server whose handlers may outlive their test: a client that hung up
    (a timeout test's, while the handler slept) is expected and not printed, since a
    traceback on stderr would land in whichever later test is capturing it."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@contextmanager
def loopback(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded HTTP server for `handler` on a free loopback port, its base URL while open."""
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _completion(
    model: str,
    text: str | None,
    logprobs: dict[str, Any] | None = None,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": text},
                **({"logprobs": logprobs} if logprobs is not None else {}),
            }
        ],
        "usage": {"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333},
    }


def _chunk(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }


class OpenAIStub:
    """Answers POST /v1/chat/completions with queued replies and records each request body.

    `status` != 200 answers an error (saying `error_message`); `delay_s` sleeps first; `fault`
    (one of FAULTS) breaks the reply in that way until it is set back to None. Streamed
    requests (`"stream": true`) get the reply as server-sent events. `logprobs` (OpenAI's
    choice.logprobs object) and `finish_reason` go into every plain reply.
    """

    def __init__(self) -> None:
        self.replies: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.delay_s = 0.0
        self.fault: Fault | None = None
        self.error_message = "upstream failure"
        self.logprobs: dict[str, Any] | None = None
        self.finish_reason = "stop"

    @contextmanager
    def serve(self) -> Iterator[str]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1: streams are chunked, so a dropped connection is detectable as a cut.
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                time.sleep(stub.delay_s)
                model = body.get("model", "stub")
                if stub.status != 200:
                    self._send(
                        stub.status,
                        {"error": {"message": stub.error_message, "type": "server_error"}},
                    )
                    return
                text = stub.replies.pop(0) if stub.replies else "NOT_IN_SOURCES"
                fault = stub.fault
                if fault == "malformed_json":
                    self._send_raw(200, b'{"id": "chatcmpl-test", "choices": [{"mess')
                elif fault == "truncated_body":
                    data = json.dumps(_completion(model, text)).encode()
                    self._send_raw(200, data[: len(data) // 2], length=len(data))
                    self.close_connection = True
                elif fault == "empty_choices":
                    self._send(200, {**_completion(model, text), "choices": []})
                elif fault == "null_content":
                    self._send(200, _completion(model, None))
                elif body.get("stream"):
                    self._stream(model, text, cut=fault == "cut_stream")
                else:
                    completion = _completion(model, text, stub.logprobs, stub.finish_reason)
                    self._send(200, completion)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                self._send_raw(status, json.dumps(payload).encode())

            def _send_raw(self, status: int, data: bytes, length: int | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data) if length is None else length))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _stream(self, model: str, text: str, cut: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                words = text.split(" ")
                # A cut stream sends the first half of the answer, then drops the connection.
                for word in words[: max(1, len(words) // 2)] if cut else words:
                    self._event(json.dumps(_chunk(model, word + " ")))
                if cut:
                    self.close_connection = True
                    return
                self._event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _event(self, data: str) -> None:
                event = f"data: {data}\n\n".encode()
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()

        with loopback(Handler) as url:
            yield f"{url}/v1"
