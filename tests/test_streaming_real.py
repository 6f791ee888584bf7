"""Streaming on the real bundled model (`guardrag serve` over the handbook KB): a `sentence`
event on /v1/ask/stream, and the first content of a streamed /v1/chat/completions, arrive
before the final event, on a question whose answer has several sentences."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from guardrag.core.embedder import OnnxEmbedder
from tests.real_model import HANDBOOK_KB, TWO_PART, serve_real_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real_api(embedder: OnnxEmbedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_real_model(
        embedder, tmp_path_factory.mktemp("real-stream"), None, "--no-ui"
    ) as base:
        yield base


def _timed_lines(response: httpx.Response) -> Iterator[tuple[float, str]]:
    started = time.monotonic()
    for line in response.iter_lines():
        yield time.monotonic() - started, line


def test_a_sentence_event_comes_before_the_final_one(real_api: str) -> None:
    seen: dict[str, float] = {}
    with httpx.stream(
        "POST", f"{real_api}/v1/ask/stream", json={"question": TWO_PART}, timeout=600
    ) as response:
        for at, line in _timed_lines(response):
            if line.startswith("event: "):
                seen.setdefault(line[7:], at)
    print(f"\n/v1/ask/stream on the real model, s after the request: {seen}")
    assert "sentence" in seen and "final" in seen, seen
    assert seen["sentence"] < seen["final"], seen


def test_chat_completions_stream_content_before_the_end(real_api: str) -> None:
    body = {"model": HANDBOOK_KB, "messages": [{"role": "user", "content": TWO_PART}]}
    first = end = None
    final: dict[str, object] = {}
    with httpx.stream(
        "POST", f"{real_api}/v1/chat/completions", json={**body, "stream": True}, timeout=600
    ) as response:
        for at, line in _timed_lines(response):
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if (chunk.get("choices") or [{}])[0].get("delta", {}).get("content") and first is None:
                first = at
            if "guardrag" in chunk:
                end, final = at, chunk["guardrag"]
    print(f"\nchat completions on the real model: first content {first} s, final {end} s")
    assert final.get("route") == "generated", final
    assert first is not None and end is not None and first < end - 0.05
    assert final.get("withdrawn") is False
