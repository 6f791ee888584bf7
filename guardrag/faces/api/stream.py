"""Running a question in a worker thread while its progress streams to the client.

The pipeline is synchronous; its nodes report progress and verified draft sentences
(`asking.ask_with_progress`) from the worker thread, and `pump` hands each report to the event
loop the moment it is made, so a client sees the first stage within milliseconds and the first
verified sentence while the model is still writing, instead of the whole answer at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.sse import format_sse_event
from starlette.responses import StreamingResponse

from guardrag.faces.asking import Asked, Progress
from guardrag.faces.sentences import Sentence

log = logging.getLogger("guardrag.api")

#: A report made while the question runs.
Report = Progress | Sentence
#: Runs the question, calling the given function with each report; returns the finished turn.
Work = Callable[[Callable[[Report], None]], Asked]


class SSEResponse(StreamingResponse):
    media_type = "text/event-stream"


def sse(event: str, data: str, event_id: str | None = None) -> bytes:
    return format_sse_event(data_str=data, event=event, id=event_id)


async def pump(work: Work) -> AsyncIterator[Report | Asked | BaseException]:
    """Each report as it happens, then the Asked result (or the exception `work` raised).

    A client that goes away stops the stream, not the question: it finishes in its thread
    and is audited like any other.
    """
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue()

    def put(item: Any) -> None:
        # A closed loop (server shutting down) means nobody is listening any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(items.put_nowait, item)

    def run() -> None:
        try:
            put(work(put))
        except BaseException as exc:  # handed to the stream, which says so to the client
            put(exc)

    loop.run_in_executor(None, run)
    while True:
        item = await items.get()
        yield item
        if not isinstance(item, Progress | Sentence):
            return
