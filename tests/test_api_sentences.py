"""Verified sentences while the model writes (faces/sentences.py), over the real pipeline and
the sample KB with a scripted model that streams its draft word by word: on /v1/ask/stream
and in the UI's chat turn, each sentence that passes grounding and the output checks is sent
before generation ends; nothing that fails them is, nor anything after it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from pydantic import Field

from guardrag.config import prompts
from guardrag.config.settings import Settings
from guardrag.faces.api import create_app
from guardrag.faces.asking import STAGE_LABELS
from guardrag.faces.sentences import WITHDRAWN_NOTE, continuation
from guardrag.faces.service import Guardrag
from guardrag.faces.ui.chat import chat_turn
from guardrag.graph.context import Services
from tests.conftest import KB, WRITES_FAQ
from tests.fakes import ScriptedChatModel
from tests.test_api import _events, services  # noqa: F401

pytestmark = pytest.mark.slow

QUESTION = "Can I pay my electricity bill?"
UNSUPPORTED = "Our branches also sell travel insurance at a discount."


class StreamingChatModel(ScriptedChatModel):
    """The scripted model, streaming each reply word by word and noting what it has sent;
    with `hold_at`, a draft waits before that word until `go` is set (at most 30 s)."""

    sent: list[str] = Field(default_factory=list)
    hold_at: int | None = None
    go: threading.Event = Field(default_factory=threading.Event)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        whole = str(self._generate(messages, stop, run_manager, **kwargs).generations[0].text)
        drafting = messages[0].content != prompts.REPHRASE_SYSTEM
        for number, word in enumerate(whole.split(" ")):
            if drafting and number == self.hold_at:
                self.go.wait(30)
            piece = word if number == 0 else f" {word}"
            self.sent.append(piece)
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk


@pytest.fixture(scope="module")
def model() -> StreamingChatModel:
    return StreamingChatModel()


@pytest.fixture(scope="module")
def streaming(services: Services, model: StreamingChatModel) -> Services:  # noqa: F811
    return replace(services, chat_model=model)


@pytest.fixture(scope="module")
def grounded(streaming: Services, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two sentences of the passage generation is given first, each cited [1]."""
    bot = Guardrag(streaming, Settings(data_dir=tmp_path_factory.mktemp("probe"), default_kb=KB))
    probe = bot.ask(QUESTION, knobs={"use_llm": False})
    top = next(d for d in probe.trail if d.node == "rerank").detail["top"][0]["source_id"]
    answer = str(streaming.store.find_by_field(KB, "source_id", top)[0].payload["answer"])
    first, second = [s.strip().rstrip(".") for s in answer.split(". ")][:2]
    return [f"{first} [1].", f"{second} [1]."]


@pytest.fixture
def client(streaming: Services, tmp_path: Path) -> Iterator[TestClient]:
    bot = Guardrag(streaming, Settings(data_dir=tmp_path, default_kb=KB, knobs=WRITES_FAQ))
    with TestClient(create_app(bot, with_ui=False)) as test_client:
        yield test_client


def stream(client: TestClient, model: StreamingChatModel, draft: str) -> list[tuple[str, Any]]:
    model.replies.append(draft)
    model.sent.clear()
    response = client.post("/v1/ask/stream", json={"question": QUESTION})
    assert response.status_code == 200
    return _events(response.text)


def drafted_at(events: list[tuple[str, Any]]) -> int:
    """The position of the event saying the draft is finished (generate's progress)."""
    return next(i for i, (e, d) in enumerate(events) if e == "progress" and d["node"] == "generate")


def test_verified_sentences_are_sent_before_the_draft_is_finished(
    client: TestClient, model: StreamingChatModel, grounded: list[str]
) -> None:
    events = stream(client, model, " ".join([*grounded, UNSUPPORTED]))
    sentences = [(i, d) for i, (e, d) in enumerate(events) if e == "sentence"]
    assert [d["text"] for _, d in sentences] == grounded, events
    assert [d["index"] for _, d in sentences] == [0, 1]
    assert all(i < drafted_at(events) for i, _ in sentences)  # while the model still wrote
    assert events[-1][0] == "final"
    final = events[-1][1]
    # the unsupported remark was never sent: left out of the answer or the answer refused
    assert UNSUPPORTED not in json.dumps([d for e, d in events if e != "final"])
    assert UNSUPPORTED not in final["answer"], final["trail"]


def test_nothing_after_an_unsupported_sentence_is_sent(
    client: TestClient, model: StreamingChatModel, grounded: list[str]
) -> None:
    events = stream(client, model, " ".join([UNSUPPORTED, *grounded, grounded[0]]))
    assert [e for e, _ in events if e == "sentence"] == [], events


def test_a_draft_that_finds_no_answer_sends_no_sentence(
    client: TestClient, model: StreamingChatModel, grounded: list[str]
) -> None:
    events = stream(client, model, f"NOT_IN_SOURCES. {grounded[0]} {grounded[1]}")
    assert [e for e, _ in events if e == "sentence"] == [], events
    assert events[-1][1]["refusal"]["reason"] == "no_relevant_docs"


def test_the_chat_shows_verified_sentences_above_the_stage(
    streaming: Services, model: StreamingChatModel, grounded: list[str], tmp_path: Path
) -> None:
    """In the UI's chat turn: the first sentence shows under 'Drafting' while the model is
    held before the rest of its draft (it goes on once the sentence is on screen), and the
    final message replaces the provisional text."""
    bot = Guardrag(streaming, Settings(data_dir=tmp_path, default_kb=KB, knobs=WRITES_FAQ))
    model.replies.append(" ".join(grounded))
    model.hold_at = len(grounded[0].split(" ")) + 1  # the second sentence has begun
    model.go.clear()
    opening, second = " ".join(grounded[0].split(" ")[:2]), grounded[1].split(" [1]")[0]
    shown_while_held: list[str] = []
    last: Any = None
    try:
        for history, *_ in chat_turn(bot, QUESTION, [], KB, {}):
            shown = str(history[-1]["content"])
            if opening in shown and not model.go.is_set():
                shown_while_held.append(shown)
                model.go.set()
            last = history
    finally:
        model.hold_at = None
        model.go.set()
    assert shown_while_held, "no verified sentence shown while the model was writing"
    assert STAGE_LABELS["drafting"] in shown_while_held[0], shown_while_held
    assert second not in shown_while_held[0]  # the second sentence was not written yet
    assert STAGE_LABELS["drafting"] not in str(last[-1]["content"])


def test_a_retried_draft_sends_nothing_of_either_attempt(
    client: TestClient, model: StreamingChatModel, grounded: list[str]
) -> None:
    """A citation to a passage that was not given gets generate's one retry; the release stops
    at that sentence and stays stopped for the second call, whose draft is judged whole."""
    model.replies.append(" ".join([grounded[0].replace("[1]", "[9]"), *grounded]))
    events = stream(client, model, " ".join(grounded))
    assert [e for e, _ in events if e == "sentence"] == [], events
    generate = next(d for d in events[-1][1]["trail"] if d["node"] == "generate")
    assert generate["detail"]["retried_because"], generate


def test_continuation_withdraws_what_the_answer_does_not_continue() -> None:
    assert continuation("", "Yes.") == ("Yes.", False)
    assert continuation("It is free [1].", "It is free [1].\nIt takes a day [1].") == (
        "\nIt takes a day [1].",
        False,
    )
    assert continuation("It is free.", "It is free [2].\n\nSources") == ("\n\nSources", False)
    rest, withdrawn = continuation("It is free [1].", "I couldn't find an answer.")
    assert withdrawn and rest.endswith("I couldn't find an answer.") and WITHDRAWN_NOTE in rest


def test_shown_sentences_of_a_refused_draft_are_withdrawn(
    client: TestClient, model: StreamingChatModel, grounded: list[str]
) -> None:
    """Sentences pass on their own, then the draft as a whole is refused: the final event
    says what was shown is withdrawn."""
    events = stream(client, model, f"{grounded[0]} {grounded[1]} NOT_IN_SOURCES.")
    assert [d["text"] for e, d in events if e == "sentence"] == grounded[:1], events
    final = events[-1][1]
    # refused (close entries may be offered instead: outcome "choices", still a refusal)
    assert final["refusal"] is not None and final["outcome"] in ("refused", "choices")
    assert final["withdrawn"] is True


def _completion_stream(client: TestClient, model: StreamingChatModel, draft: str) -> list[Any]:
    model.replies.append(draft)
    body = {"model": KB, "messages": [{"role": "user", "content": QUESTION}], "stream": True}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


def test_chat_completions_stream_sends_verified_sentences_first(
    client: TestClient, model: StreamingChatModel, grounded: list[str]
) -> None:
    chunks = _completion_stream(client, model, " ".join(grounded))
    contents = [c["choices"][0]["delta"].get("content") or "" for c in chunks]
    first = next(i for i, text in enumerate(contents) if text)
    assert contents[first] == grounded[0]  # a verified sentence, not the finished answer
    final = chunks[-1]["guardrag"]
    assert final["withdrawn"] is False and final["outcome"] == "answered", final["trail"]
    assert " ".join("".join(contents).split()).startswith(" ".join(final["answer"].split()))
    refused = _completion_stream(client, model, f"{grounded[0]} {grounded[1]} NOT_IN_SOURCES.")
    said = "".join(c["choices"][0]["delta"].get("content") or "" for c in refused)
    assert refused[-1]["guardrag"]["withdrawn"] is True and WITHDRAWN_NOTE in said
