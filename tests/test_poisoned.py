"""Poisoned knowledge: KB entries carrying instructions for the model (datasets/poisoned) never
make the bot deliver what they ask for, on any route.

1. ingest quarantines every one of them;
2. an operator who forces them in anyway (ingest with the quarantine bypassed, the same code
   path otherwise) still must not see their payload reach a customer: asked verbatim
   (exact_match), reworded (semantic_match or refused) or through a chat model that obeys
   whatever the passages say (generated). exact_match and retrieve drop entries the passage
   scan flags; moderate_output scans the answer as a backstop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from guardrag.config.settings import Settings
from guardrag.contract import Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb import ingest as ingest_module
from guardrag.core.kb.entries import Entry
from guardrag.core.kb.ingest import ingest
from guardrag.core.kb.quarantine import Screening
from guardrag.core.store import VectorStore
from guardrag.core.store.server import ServerStore
from guardrag.faces.service import Guardrag, build_services
from tests.conftest import KB, REPO, SAMPLE_FAQ
from tests.fakes import ScriptedChatModel

POISONED = REPO / "datasets" / "poisoned" / "faq.jsonl"
ENTRIES: list[dict[str, str]] = [json.loads(line) for line in POISONED.read_text().splitlines()]
IDS = [e["id"] for e in ENTRIES]
PASSAGE = re.compile(r"\[(\d+)\][^\n]*\n(.*?)(?=\n\s*\[\d+\]|\Z)", re.DOTALL)


def delivered(result: Result, entry: dict[str, str]) -> bool:
    """Whether the customer sees the injection's payload (as written, or its digits)."""
    if result.outcome != "answered":
        return False
    answer, payload = result.answer.lower(), entry["payload"].lower()
    digits = re.sub(r"\D", "", payload)
    return payload in answer or (len(digits) >= 8 and digits in re.sub(r"\D", "", answer))


def obey(prompt: str) -> str:
    """What a model that follows poisoned passages says: for every poisoned entry whose text
    reached the prompt, the sentence carrying its payload, cited (the strongest case for
    grounding: the claim is word for word in the passage)."""
    parts = []
    for number, text in PASSAGE.findall(prompt):
        for entry in ENTRIES:
            if entry["answer"][:30] in text:
                sentence = next(
                    (s for s in re.split(r"(?<=[.!?])\s+", text) if entry["payload"] in s),
                    entry["payload"],
                )
                parts.append(f"{sentence.strip()} [{number}]")
    return " ".join(parts) or "NOT_IN_SOURCES"


class ObedientChatModel(ScriptedChatModel):
    """The recording fake, replying with `obey(prompt)` to whatever it is asked."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.replies.append(obey("\n".join(str(m.content) for m in messages)))
        return super()._generate(messages, *args, **kwargs)


def keep_everything(entries: list[Entry], *args: Any, **kwargs: Any) -> Screening:
    """The quarantine bypassed: every entry indexed."""
    return Screening(kept=entries, held=[], allowed=[], allowed_from="default")


@pytest.fixture(scope="module")
def forced(
    embedder: OnnxEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VectorStore]:
    """A KB of real entries plus every poisoned one, forced past the quarantine."""
    folder = tmp_path_factory.mktemp("poisoned")
    real = folder / "faq.jsonl"
    real.write_text("".join(SAMPLE_FAQ.read_text().splitlines(keepends=True)[:40]))
    store = ServerStore(location=":memory:")
    ingest(store, embedder, KB, [real], description="Kinetic Wallet")
    with pytest.MonkeyPatch.context() as patch:  # the operator override ingest does not offer
        patch.setattr(ingest_module, "quarantine", keep_everything)
        report = ingest(store, embedder, KB, [POISONED])
    assert report.added == len(ENTRIES) and not report.flagged
    yield store
    store.close()


@pytest.fixture(scope="module")
def obedient() -> ObedientChatModel:
    return ObedientChatModel()


@pytest.fixture(scope="module")
def poisoned_bot(
    forced: VectorStore,
    embedder: OnnxEmbedder,
    obedient: ObedientChatModel,
    tmp_path_factory: pytest.TempPathFactory,
) -> Guardrag:
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"), default_kb=KB, llm_local=False)
    return Guardrag(
        build_services(settings, store=forced, embedder=embedder, chat_model=obedient), settings
    )


def test_ingest_quarantines_every_poisoned_entry(embedder: OnnxEmbedder) -> None:
    store = ServerStore(location=":memory:")
    report = ingest(store, embedder, "poisoned", [POISONED])
    flagged = {line.split()[1].rstrip(":") for line in report.flagged}
    assert flagged == set(IDS), report.flagged
    info = store.kb_info("poisoned")
    assert info is not None and info.count == 0
    assert {q["source_id"] for q in info.extra["quarantined"]} == set(IDS)
    store.close()


def test_the_obedient_model_really_obeys(obedient: ObedientChatModel) -> None:
    """The control: given a poisoned passage, the fake model does repeat its payload."""
    entry = ENTRIES[4]
    prompt = f"[1] (source {entry['id']})\n{entry['question']}\n{entry['answer']}"
    reply = obedient.invoke(prompt).content
    assert entry["payload"] in str(reply) and "[1]" in str(reply)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_verbatim_question_never_delivers_the_payload(
    poisoned_bot: Guardrag, entry: dict[str, str]
) -> None:
    result = poisoned_bot.ask(entry["question"])
    assert not delivered(result, entry), (result.route, result.answer)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_reworded_question_never_delivers_the_payload(
    poisoned_bot: Guardrag, entry: dict[str, str]
) -> None:
    result = poisoned_bot.ask(entry["paraphrase"], knobs={"use_llm": False})
    assert not delivered(result, entry), (result.route, result.answer)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_obedient_model_never_delivers_the_payload(
    poisoned_bot: Guardrag, obedient: ObedientChatModel, entry: dict[str, str]
) -> None:
    # No verbatim route: the passages go to the model, which obeys them.
    knobs = {"exact_match": False, "faq_answer_threshold": 2.0}
    result = poisoned_bot.ask(entry["question"], knobs=knobs)
    assert not delivered(result, entry), (result.route, result.answer, result.trail[-3:])
