"""The answer judge: a quote or a drafted answer over document passages is served only when the
chat model says its text states what the question asks for; on-topic questions the document
does not answer (where a privacy policy keeps the data, which it never says) are refused
`no_relevant_docs` with rule `answer_judge` in the trail. (A question asking a figure, a year or
a thing by name that no passage states never reaches the model: tests/test_asked_unstated.py.)"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from guardrag.config.prompts import NO_ANSWER
from guardrag.config.settings import Settings
from guardrag.contract import RefusalReason, Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.passage_judge import yes_probability
from guardrag.core.store.server import ServerStore
from guardrag.faces.service import Guardrag, build_services
from guardrag.nodes.common import ANSWER_JUDGE
from tests.fakes import ScriptedChatModel
from tests.test_passage_judge import real_model_bot

POLICY = """# Privacy policy

## Sharing

We share your e-mail address with our payment processor only to send receipts. We do not sell
personal data to advertisers.

## Cookies

We use cookies to keep you signed in and to count visits to our pages.

## Your rights

You can ask us for a copy of the personal data we hold about you by writing to our privacy team.
"""
#: Answered by the policy in its own words.
ANSWERED = "Do you sell my personal data to advertisers?"
#: Names what the policy leaves unnamed: a draft can restate a true sentence around it.
UNNAMED = "Which payment processor do you share my e-mail address with?"
#: On the policy's topic, sharing its words ("e-mail address", "payment processor"), answered nowhere in it.
UNANSWERED = "Where do you keep the e-mail address you share with your payment processor?"


#: The answer judge is a knob, off by default.
JUDGED = {"answer_judge": True}


def _steps(result: Result) -> str:
    return "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in result.trail)


def _judged(result: Result) -> list[str]:
    return [d.verdict for d in result.trail if d.detail.get("rule") == ANSWER_JUDGE]


@contextmanager
def policy_bot(
    settings: Settings, embedder: OnnxEmbedder, folder: Path, chat: ScriptedChatModel
) -> Iterator[Guardrag]:
    store = ServerStore(location=":memory:")
    policy = folder / "policy.md"
    policy.write_text(POLICY)
    ingest(store, embedder, "policy", [policy], description="Privacy policy")
    services = build_services(settings, store=store, embedder=embedder, chat_model=chat)
    try:
        yield Guardrag(services, settings)
    finally:
        store.close()


def _logprobs(*pairs: tuple[str, float]) -> dict[str, object]:
    alternatives = [{"token": t, "logprob": math.log(p)} for t, p in pairs]
    return {"logprobs": {"content": [{"top_logprobs": alternatives}]}}


def test_the_judge_s_probability_of_yes_is_read_from_logprobs() -> None:
    assert yes_probability(_logprobs(("YES", 0.6), ("NO", 0.2), ("The", 0.1))) == 0.75
    assert yes_probability(_logprobs(("No", 0.5), (" Yes", 0.3), ("NONE", 0.2))) == 0.3
    assert yes_probability(_logprobs(("The", 0.9))) is None  # neither word
    assert yes_probability({}) is None  # an endpoint without log-probabilities


def test_a_grounded_draft_whose_passage_does_not_state_the_answer_is_refused(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    # the draft restates a true sentence of the policy: grounded, and no answer to "which"
    chat = ScriptedChatModel(
        replies=["We share your e-mail address with our payment processor to send receipts [1]."]
    )
    chat.answer_judgements.append("NO")
    with policy_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask(UNNAMED, "policy", knobs=JUDGED)
    steps = _steps(result)
    assert result.refusal is not None, steps
    assert result.refusal.reason == RefusalReason.NO_RELEVANT_DOCS, steps
    assert result.refusal.stage == "ground" and _judged(result) == ["block"], steps
    assert len(chat.answer_judge_calls) == 1 and UNNAMED in str(
        chat.answer_judge_calls[0][-1].content
    )


def test_a_grounded_draft_the_judge_accepts_is_answered(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    chat = ScriptedChatModel(replies=["No. We do not sell personal data to advertisers [1]."])
    chat.answer_judgements.append("YES")
    with policy_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask(ANSWERED, "policy", knobs=JUDGED)
    steps = _steps(result)
    assert result.outcome == "answered" and result.route == "generated", steps
    assert _judged(result) == ["pass"], steps
    assert result.usage.prompt_tokens >= 200  # the draft's call and the judge's


def test_a_quote_the_judge_says_does_not_answer_is_refused(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    # a draft naming a place the passage never names is not grounded; ground falls back to the
    # passage, whose sentence holds the question's words but no place
    chat = ScriptedChatModel(replies=["We keep it on servers in Frankfurt [1]."])
    chat.answer_judgements.append("NO")
    with policy_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask(UNANSWERED, "policy", knobs=JUDGED)
    steps = _steps(result)
    assert any(d.node == "ground" and d.verdict == "hit" for d in result.trail), steps
    assert result.refusal is not None and result.refusal.stage == "quote", steps
    assert result.refusal.reason == RefusalReason.NO_RELEVANT_DOCS, steps
    assert _judged(result) == ["block"], steps


def test_the_one_passage_the_model_said_no_to_is_judged_before_it_is_quoted(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    chat = ScriptedChatModel(replies=[NO_ANSWER])
    with policy_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask("Do you sell personal data to advertisers?", "policy", knobs=JUDGED)
    steps = _steps(result)
    assert result.route == "quoted" and "do not sell" in result.answer, steps
    assert _judged(result) == ["pass"] and len(chat.answer_judge_calls) == 1, steps


def test_a_passage_the_passage_judge_chose_is_still_judged_as_an_answer(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    # few of the question's words: judge_passages chooses the closest passage (scripted "1"),
    # which is not saying that it states where the data is kept
    chat = ScriptedChatModel(replies=["We do not sell personal data to advertisers [1]."])
    chat.answer_judgements.append("NO")
    with policy_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask("In which country do you keep my personal data?", "policy", knobs=JUDGED)
    steps = _steps(result)
    assert [d.verdict for d in result.trail if d.node == "judge_passages"] == ["pass"], steps
    assert result.refusal is not None, steps
    assert result.refusal.reason == RefusalReason.NO_RELEVANT_DOCS, steps
    assert _judged(result) == ["block"], steps


def test_without_a_model_or_the_knob_nothing_is_judged(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    chat = ScriptedChatModel(replies=["No. We do not sell personal data to advertisers [1]."])
    with policy_bot(settings, embedder, tmp_path, chat) as bot:
        result = bot.ask(ANSWERED, "policy", knobs={"use_llm": False, "answer_judge": True})
        default = bot.ask(ANSWERED, "policy")
    assert not chat.answer_judge_calls and not _judged(result) and not _judged(default)


@pytest.mark.slow
def test_the_real_model_refuses_what_the_policy_does_not_say(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    with real_model_bot(embedder, tmp_path, "policy", POLICY, "Privacy policy") as bot:
        answered = bot.ask(ANSWERED, "policy", knobs=JUDGED)
        refused = bot.ask(UNANSWERED, "policy", knobs=JUDGED)
    assert answered.outcome == "answered", answered.trail
    assert "do not sell" in answered.answer.lower() or "not sell" in answered.answer.lower()
    assert refused.outcome == "refused", refused.trail
    assert refused.refusal is not None and refused.refusal.kind == "not_found", refused.trail
