"""generate over real HTTP: ChatOpenAI (built by guardrag.core.llm.client) against a local
OpenAI-protocol server: a stub for the failure modes, the real bundled server (slow) for the
protocol details our answers rely on (the completion cap, usage in streams, determinism)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from guardrag.config.settings import Settings
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.llm import local as local_llm
from guardrag.core.llm.client import load_chat_model
from guardrag.core.store import VectorStore
from tests.conftest import KB
from tests.openai_stub import OpenAIStub
from tests.test_local_llm import TO_GENERATION, generated_question, installed_settings

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


def first_passage(bot: Guardrag, store: VectorStore) -> tuple[str, str, str]:
    """A question that reaches generation, its first passage's source id and that answer."""
    question = generated_question(bot)
    passage = bot.ask(question, knobs={**TO_GENERATION, "use_llm": False}).trail
    top = next(d for d in passage if d.node == "rerank").detail["top"][0]["source_id"]
    return question, top, store.find_by_field(KB, "source_id", top)[0].payload["answer"]


def test_generated_answer_over_http(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    stub = OpenAIStub()
    with stub.serve() as url:
        bot = make_bot(tmp_path, sample_store, embedder, url)
        question, top, answer = first_passage(bot, sample_store)
        stub.replies = [f"{answer.split('. ')[0]} [1]."]
        result = bot.ask(question, knobs=TO_GENERATION)
    assert result.route == "generated", result.trail
    assert result.citations[0].source_id == top
    request = stub.requests[-1]
    assert request["model"] == "gpt-4o-mini" and request["temperature"] == 0
    assert request["max_completion_tokens"] == 120  # RunConfig.max_answer_tokens
    assert question in request["messages"][-1]["content"]
    assert result.usage.prompt_tokens == 321 and result.usage.completion_tokens == 12
    assert result.usage.estimated_cost_usd > 0


def test_a_draft_cut_by_the_token_cap_keeps_its_whole_sentences(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    stub = OpenAIStub()
    with stub.serve() as url:
        bot = make_bot(tmp_path, sample_store, embedder, url)
        question, _, answer = first_passage(bot, sample_store)
        whole = answer.split(". ")[0].rstrip(".")
        stub.replies = [f"{whole} [1]. Then you should also go to the"]
        stub.finish_reason = "length"
        result = bot.ask(question, knobs=TO_GENERATION)
    assert result.route == "generated", result.trail
    assert result.answer.startswith(whole) and "go to the" not in result.answer


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
    stub.delay_s = 60
    with stub.serve() as url:
        bot = make_bot(tmp_path, sample_store, embedder, url)
        question = generated_question(bot)
        started = time.monotonic()
        result = bot.ask(question, knobs=TO_GENERATION)
        elapsed = time.monotonic() - started
    assert result.refusal and result.refusal.reason.value == "llm_unavailable"
    assert elapsed < 30  # the 2 s timeout, not the 60 s the server takes (a busy machine)


def test_dead_endpoint_is_llm_unavailable(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the socket closes
    result = make_bot(tmp_path, sample_store, embedder, f"http://127.0.0.1:{port}/v1").ask(QUESTION)
    assert result.refusal and result.refusal.reason.value == "llm_unavailable"
    # the unsure question's first model call (its rephrasing) names the failure
    assert "Connection" in next(d for d in result.trail if d.verdict == "error").reason


@pytest.fixture(scope="module")
def local_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings whose chat model is the real bundled server (started on first use)."""
    yield installed_settings(tmp_path_factory.mktemp("http"), llm_timeout_s=300)
    local_llm.stop_all()


@pytest.mark.slow
def test_the_real_server_applies_the_cap_and_is_deterministic(local_settings: Settings) -> None:
    chat = load_chat_model(local_settings, max_tokens=6)
    assert chat is not None
    prompt = "Count from 1 to 100, separated by commas."
    first, second = chat.invoke(prompt), chat.invoke(prompt)
    assert first.usage_metadata is not None and first.usage_metadata["output_tokens"] == 6
    assert first.response_metadata["finish_reason"] == "length"  # max_completion_tokens held
    assert first.content == second.content  # temperature 0


@pytest.mark.slow
def test_the_real_server_streams_with_usage(local_settings: Settings) -> None:
    chat = load_chat_model(local_settings, max_tokens=12)
    assert chat is not None
    chunks = list(chat.stream("Name three colours."))
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert len(chunks) > 2 and str(whole.content).strip()
    usage = whole.usage_metadata  # sent after the last token (stream_usage)
    assert usage is not None and 0 < usage["output_tokens"] <= 12 and usage["input_tokens"] > 5
