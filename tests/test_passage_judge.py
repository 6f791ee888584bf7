"""judge_passages: document passages that share few of the question's words are judged by the
chat model, which chooses the passages the answer is written from, or refuses before writing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from guardrag.config.settings import Settings
from guardrag.contract import RefusalReason, Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.llm import local as local_llm
from guardrag.core.passage_judge import read_choice
from guardrag.core.store.edge import EdgeStore
from guardrag.core.store.server import ServerStore
from guardrag.faces.service import Guardrag, build_services
from tests.fakes import ScriptedChatModel
from tests.test_local_llm import installed_settings

GUIDE = """# Referral guide

## Breast symptoms

Refer people using a suspected cancer pathway referral for breast cancer if they are aged 30
and over and have an unexplained breast lump with or without pain.

## Bowel symptoms

Offer faecal immunochemical testing to assess for colorectal cancer in adults with a change in
bowel habit that lasts more than four weeks.

## Skin symptoms

Refer people using a suspected cancer pathway referral for melanoma if they have a suspicious
pigmented skin lesion with a weighted 7-point checklist score of 3 or more.
"""
#: Lay words for the breast recommendation: few of its terms ("painless", "lump", "my").
LAY_QUESTION = (
    "I'm 45 and found a painless lump in my breast, should my GP send me to a specialist?"
)
#: On the guideline's topic, answered nowhere in it.
UNANSWERED = "Is a lump in the neck a reason for an urgent cancer referral?"


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [
        ("2", (2,)),
        ("1, 3", (1, 3)),
        ("Passage 3", (3,)),
        ("NONE", ()),
        ("none of them", ()),
        ("4", ()),  # only 3 shown
        ("", ()),
        ("The answer is that people aged 30 and over with a lump should be referred", ()),
    ],
)
def test_the_judges_reply_is_read_strictly(reply: str, chosen: tuple[int, ...]) -> None:
    assert read_choice(reply, 3) == chosen


@contextmanager
def guide_bot(
    settings: Settings, embedder: OnnxEmbedder, folder: Path, chat: object
) -> Iterator[Guardrag]:
    store = ServerStore(location=":memory:")
    guide = folder / "guide.md"
    guide.write_text(GUIDE)
    ingest(store, embedder, "guide", [guide], description="Referral guide")
    services = build_services(settings, store=store, embedder=embedder, chat_model=chat)  # type: ignore[arg-type]
    try:
        yield Guardrag(services, settings)
    finally:
        store.close()


def _judged(result: Result) -> list[str]:
    return [d.verdict for d in result.trail if d.node == "judge_passages"]


def test_lay_words_reach_the_passage_the_judge_chooses(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    chat = ScriptedChatModel(
        replies=["Yes: people aged 30 and over with a breast lump are referred [1]."]
    )
    chat.judgements.append("1")
    with guide_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask(LAY_QUESTION, "guide")
    rerank = next(d for d in result.trail if d.node == "rerank")
    assert "the model judges them" in rerank.reason
    assert _judged(result) == ["pass"] and len(chat.judge_calls) == 1
    shown = str(chat.judge_calls[0][-1].content)
    assert LAY_QUESTION in shown and "[1]" in shown
    # the model writes from the chosen passage only
    assert len(chat.calls) >= 1 and "breast lump" in chat.prompt_text(0)
    assert "melanoma" not in chat.prompt_text(0)


def test_no_passage_chosen_refuses_before_any_writing(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    chat = ScriptedChatModel()
    chat.judgements.append("NONE")
    with guide_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask(UNANSWERED, "guide")
    assert result.refusal is not None
    assert result.refusal.reason == RefusalReason.NO_RELEVANT_DOCS
    assert _judged(result) == ["miss"] and not chat.calls  # nothing was written


def test_a_failing_judge_is_an_error_not_a_not_found(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    chat = ScriptedChatModel()
    chat.judgements.append(ConnectionError("model server down"))
    with guide_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask(LAY_QUESTION, "guide")
    assert result.refusal is not None and result.refusal.kind == "error"
    assert result.refusal.reason == RefusalReason.LLM_UNAVAILABLE
    assert _judged(result) == ["error"]


@contextmanager
def real_model_bot(
    embedder: OnnxEmbedder, folder: Path, kb: str, text: str, description: str
) -> Iterator[Guardrag]:
    """A bot with the bundled model over one Markdown document `text` (KB `kb`)."""
    settings = installed_settings(folder / "data", second_opinion=False, llm_timeout_s=300)
    document = folder / f"{kb}.md"
    document.write_text(text)
    store = EdgeStore(settings.data_dir)
    try:
        ingest(store, embedder, kb, [document], description=description)
    finally:
        store.close()
    bot = Guardrag.from_settings(settings, audit=False)
    try:
        yield bot
    finally:
        bot.close()
        local_llm.stop_all()


@pytest.mark.slow
def test_the_real_model_judges_lay_words_and_an_unanswered_question(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    with real_model_bot(embedder, tmp_path, "guide", GUIDE, "Referral guide") as bot:
        answered = bot.ask(LAY_QUESTION, "guide")
        refused = bot.ask(UNANSWERED, "guide")
    assert _judged(answered) == ["pass"], answered.trail
    judged = next(d for d in answered.trail if d.node == "judge_passages").detail
    chosen = read_choice(str(judged["reply"]), len(judged["judged"]))
    assert any("breast" in str(judged["judged"][n - 1]).lower() for n in chosen), judged
    # what the model then writes from the chosen passage is generate's and ground's to judge
    assert refused.outcome == "refused", refused
