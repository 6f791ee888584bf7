"""The optional LLM judge in `ground`: it decides paraphrases, never numbers or citations."""

from __future__ import annotations

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.grounding import GroundingReport, Passage, check_grounding
from guardrag.core.grounding.judge import judge_report
from guardrag.faces.service import Guardrag
from tests.conftest import WRITES_FAQ
from tests.fakes import ScriptedChatModel

PASSAGES = [
    Passage(1, "fees", "Credit card top-ups carry a 1.5% fee, with a minimum of RM0.50."),
    Passage(2, "time", "FPX top-ups can take up to 30 minutes to reflect in your wallet."),
]


def judged(
    answer: str, replies: list[str | Exception], embedder: OnnxEmbedder
) -> tuple[GroundingReport, ScriptedChatModel]:
    judge = ScriptedChatModel(replies=replies)
    report = judge_report(check_grounding(answer, PASSAGES, embedder), PASSAGES, judge)
    return report, judge


def test_the_judge_accepts_a_faithful_paraphrase_the_thresholds_miss(
    embedder: OnnxEmbedder,
) -> None:
    answer = "Money sent through FPX may need half an hour before you see it [2]."
    assert not check_grounding(answer, PASSAGES, embedder).supported
    report, judge = judged(answer, ["SUPPORTED"], embedder)
    assert report.supported and report.claims[0].reason == "judge: supported by [2]"
    assert "half an hour" in judge.prompt_text() and "FPX top-ups can take" in judge.prompt_text()


def test_the_judge_rejects_what_the_thresholds_let_through(embedder: OnnxEmbedder) -> None:
    answer = "FPX top-ups can take up to 30 minutes to reflect in your wallet [2]."
    assert check_grounding(answer, PASSAGES, embedder).supported
    report, _ = judged(answer, ["UNSUPPORTED"], embedder)
    assert not report.supported and "judge: unsupported" in report.reason


def test_numbers_and_citations_stay_with_the_rules(embedder: OnnxEmbedder) -> None:
    report, judge = judged("Credit card top-ups carry a 2.5% fee [1].", ["SUPPORTED"], embedder)
    assert not report.supported and judge.calls == []  # a wrong figure is never judged
    report, judge = judged("FPX is instant [7].", ["SUPPORTED"], embedder)
    assert not report.supported and judge.calls == []


def test_a_figure_moved_to_another_scope_stays_with_the_rules(embedder: OnnxEmbedder) -> None:
    """The bundled 1.5B judge passed the overseas ATM fee given for a local ATM."""
    atm = [Passage(1, "atm", "Overseas ATM withdrawals with the card cost RM10 each plus a 1% "
                   "currency conversion fee. Local ATM withdrawals cost RM1 each.")]  # fmt: skip
    claim = "A withdrawal at a local ATM costs RM10 each plus a 1% currency conversion fee [1]."
    judge = ScriptedChatModel(replies=["SUPPORTED"])
    report = judge_report(check_grounding(claim, atm, embedder), atm, judge)
    assert not report.supported and judge.calls == [], report.reason


def test_a_failing_judge_leaves_the_rules_verdict(embedder: OnnxEmbedder) -> None:
    answer = "FPX top-ups can take up to 30 minutes to reflect in your wallet [2]."
    report, _ = judged(answer, [TimeoutError("judge down")], embedder)
    assert report.supported and "judge failed: TimeoutError" in report.claims[0].reason


def test_the_knob_turns_the_judge_on_in_the_pipeline(
    bot: Guardrag, chat: ScriptedChatModel
) -> None:
    question = "How long do FPX top-ups take to show up, and is there a fee for them?"
    chat.replies = [
        "FPX top-ups can take up to 30 minutes to reflect in your wallet.",
        "UNSUPPORTED",
    ]
    result = bot.ask(
        question,
        knobs={**WRITES_FAQ, "faq_answer_threshold": 1.1, "grounding_judge": True},
    )
    assert result.refusal is not None and result.refusal.reason == "not_grounded"
    assert "judge: unsupported" in result.trail[-2].reason
    assert "Claim:" in chat.prompt_text(1)
