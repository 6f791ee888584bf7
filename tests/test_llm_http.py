"""generate over real HTTP: ChatOpenAI (built by guardrag.core.llm.client) against a local OpenAI-protocol server."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from guardrag.config.settings import Settings
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.llm.client import load_chat_model
from guardrag.core.store import VectorStore
from tests.conftest import KB
from tests.openai_stub import OpenAIStub

if TYPE_CHECKING:
    from guardrag.faces.service import Guardrag

QUESTION = "is it free to top up my wallet?"


def make_bot(tmp_path: Path, store: VectorStore, embedder: OnnxEmbedder, url: str) -> Guardrag:
    from guardrag.faces.service import Guardrag, build_services

    settings = Settings(
        data_dir=tmp_path,
        default_kb=KB,
        llm_base_url=url,
        llm_model="gpt-4o-mini",
        llm_timeout_s=2,
        llm_max_retries=0,
    )
    return Guardrag(
        build_services(
            settings, store=store, embedder=embedder, chat_model=load_chat_model(settings)
        ),
        settings,
    )


def test_no_endpoint_means_no_model() -> None:
    assert load_chat_model(Settings(llm_base_url=None, llm_local=False)) is None


def test_generated_answer_over_http(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    stub = OpenAIStub()
    with stub.serve() as url:
        bot = make_bot(tmp_path, sample_store, embedder, url)
        passage = bot.ask(QUESTION, knobs={"use_llm": False}).trail
        top = next(d for d in passage if d.node == "rerank").detail["top"][0]["source_id"]
        answer = (
            sample_store.find_by_field(KB, "source_id", top)[0].payload["answer"].split(". ")[0]
        )
        stub.replies = [f"{answer} [1]."]
        result = bot.ask(QUESTION)
    assert result.route == "generated", result.trail
    assert result.citations[0].source_id == top
    request = stub.requests[-1]
    assert request["model"] == "gpt-4o-mini" and request["temperature"] == 0
    assert request["max_completion_tokens"] == 200  # RunConfig.max_answer_tokens
    assert QUESTION in request["messages"][-1]["content"]
    assert result.usage.prompt_tokens == 321 and result.usage.completion_tokens == 12
    assert result.usage.estimated_cost_usd > 0


def test_server_error_is_llm_unavailable(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    stub = OpenAIStub()
    stub.status = 500
    with stub.serve() as url:
        result = make_bot(tmp_path, sample_store, embedder, url).ask(QUESTION)
    assert (
        result.refusal
        and result.refusal.reason.value == "llm_unavailable"
        and result.refusal.kind == "error"
    )


@pytest.mark.slow
def test_slow_endpoint_times_out_within_bound(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    stub = OpenAIStub()
    stub.delay_s = 5
    with stub.serve() as url:
        started = time.monotonic()
        result = make_bot(tmp_path, sample_store, embedder, url).ask(QUESTION)
        elapsed = time.monotonic() - started
    assert result.refusal and result.refusal.reason.value == "llm_unavailable"
    assert elapsed < 4.5  # the 2 s timeout, not the 5 s the server takes


def test_dead_endpoint_is_llm_unavailable(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the socket closes
    result = make_bot(tmp_path, sample_store, embedder, f"http://127.0.0.1:{port}/v1").ask(QUESTION)
    assert result.refusal and result.refusal.reason.value == "llm_unavailable"
    assert "Connection" in next(d for d in result.trail if d.node == "generate").reason
