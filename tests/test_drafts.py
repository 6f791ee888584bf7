"""Draft hygiene and the one bounded retry in `generate`."""

from __future__ import annotations

import pytest

from guardrag.config import prompts
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.grounding import DEFAULT_MIN_SIMILARITY, Passage
from guardrag.core.grounding.drafts import check_draft, declines, finished, prune, tidy
from guardrag.faces.service import Guardrag
from tests.conftest import WRITES_FAQ
from tests.fakes import ScriptedChatModel

#: Reaches generation on the sample KB (no FAQ entry answers it verbatim).
QUESTION = "How long do FPX top-ups take to show up, and is there a fee for them?"
#: No entry is confident enough to answer verbatim, and the model may write from the first.
WRITTEN = {**WRITES_FAQ, "faq_answer_threshold": 1.1}


@pytest.mark.parametrize(
    ("draft", "kept"),
    [
        ("Top-ups are free [1]. This is stated in passage [1].", "Top-ups are free [1]."),
        ("Fees apply [1]. This is supported by both [1] and [2].", "Fees apply [1]."),
        ("It is 1.5% [2].\nAs mentioned in the passages, see above.", "It is 1.5% [2]."),
        ("Yes [1]. Cards are accepted [1].", "Yes [1]. Cards are accepted [1]."),
        ("According to passage [1], the fee is RM1.", "The fee is RM1 [1]."),
        ("Passage [2] states that cards expire after 5 years.", "Cards expire after 5 years [2]."),
        ("Passages [1] and [2] say fees apply", "Fees apply [1] [2]"),
        (
            "It arrives in 7-14 days in Sabah, as stated in Passage.",
            "It arrives in 7-14 days in Sabah.",
        ),
        ("The fee is RM12, according to passages [1] and [2].", "The fee is RM12 [1] [2]."),
        ("The fee is RM12 (see passage 2).", "The fee is RM12 [2]."),
        ("Firms must warn clearly. [1]", "Firms must warn clearly [1]."),
        ("Firms must warn. [1]\nIt is 1.5%. [2] [3]", "Firms must warn [1].\nIt is 1.5% [2] [3]."),
        (
            "Tap Forgot password [1]. If you need further assistance, please refer to Passage [2].",
            "Tap Forgot password [1].",
        ),
        ("Top-ups are free [1]. For more information, see passage [3].", "Top-ups are free [1]."),
        (
            "Top-ups are free; see passage [1] for the fees.",  # a fact beside it: kept for ground
            "Top-ups are free; see passage [1] for the fees.",
        ),
    ],
)
def test_tidy_removes_only_sentences_about_the_sources(draft: str, kept: str) -> None:
    assert tidy(draft)[0] == kept


@pytest.mark.parametrize(
    ("draft", "problem"),
    [
        ('<passage id="1">Top-ups are free</passage>', "echoed"),
        ("How long do FPX top-ups take?", "echoed"),
        ("The fee is RM1 [3].", "cited [3] but only passages [1] to [2] exist"),
        ("This is explained in the passages [1].", "did not answer"),
        (prompts.ANSWER_SYSTEM.format(kb_title="X", no_answer="N")[:400], "instructions"),
    ],
)
def test_check_names_what_is_wrong(draft: str, problem: str) -> None:
    check = check_draft(
        draft, ["Top-ups are free.", "Cards cost 1.5%."], QUESTION, prompts.LEAKABLE
    )
    assert any(problem in p for p in check.problems), check


def test_clean_draft_has_no_problems() -> None:
    check = check_draft("Top-ups are free [1].", ["Top-ups are free."], QUESTION, prompts.LEAKABLE)
    assert check.problems == () and check.removed == ()


def test_generate_retries_once_with_the_problem_named(
    bot: Guardrag, chat: ScriptedChatModel
) -> None:
    chat.replies = [
        "FPX top-ups reflect within 30 minutes [7].",
        "FPX top-ups can take up to 30 minutes to reflect in your wallet.",  # uncited: any passage
    ]
    result = bot.ask(QUESTION, knobs=WRITTEN)
    generate = next(d for d in result.trail if d.node == "generate")
    assert generate.reason == "drafted after one retry"
    assert "cited [7]" in generate.detail["retried_because"][0]
    assert len(chat.calls) == 2 and "cited [7]" in chat.prompt_text(1)
    calls = len(chat.calls) + len(chat.rephrase_calls)  # both drafts, and any rephrase call
    assert result.usage.prompt_tokens == 100 * calls  # every call is counted (fakes.py: 100)
    assert result.outcome == "answered", [(d.node, d.reason, d.detail) for d in result.trail[-3:]]
    # Uncited, so the citation is the passage that supports it, wherever it was in the prompt.
    assert [c.source_id for c in result.citations] == ["kw-top-up-005"]


def test_generate_retries_at_most_once(bot: Guardrag, chat: ScriptedChatModel) -> None:
    chat.replies = ["The fee is RM1 [9].", "The fee is RM1 [9].", "never asked"]
    result = bot.ask(QUESTION, knobs=WRITTEN)
    assert len(chat.calls) == 2
    assert result.refusal is not None and result.refusal.reason == "not_grounded"
    assert result.refusal.stage == "ground"  # the verdict stays with the grounding check


def test_source_talk_never_reaches_the_customer(bot: Guardrag, chat: ScriptedChatModel) -> None:
    chat.replies = [
        "FPX top-ups can take up to 30 minutes to reflect in your wallet. "
        "This is stated in the passage [1]."
    ]
    result = bot.ask(QUESTION, knobs=WRITTEN)
    assert result.outcome == "answered" and "passage" not in result.answer
    assert len(chat.calls) == 1


@pytest.mark.parametrize(
    ("draft", "declined"),
    [
        ("The FCA penalties for non-compliant crypto promotions are not in sources.", True),
        ("The passages do not mention a retention period.", True),
        ("The exact font size is not specified in the provided passages.", True),
        ("The documents provided do not specify the penalties.", True),
        ("Fees are RM1 [1]. The fee for cards is not mentioned in the passages.", False),
        ("Your passport is not included in the documents we return [1].", False),  # a claim
        ("Refunds are not given in cash.", False),
    ],
)
def test_a_draft_that_only_says_the_passages_do_not_answer_declines(
    draft: str, declined: bool
) -> None:
    assert declines(draft) is declined


def test_the_model_declining_in_its_own_words_is_its_no(
    bot: Guardrag, chat: ScriptedChatModel
) -> None:
    """Read as a claim, "X is not in the sources." went on to ground's fallbacks, which quoted
    a passage on the topic that does not answer; it is the model's NOT_IN_SOURCES."""
    chat.replies = ["The FPX top-up times for weekends are not in the sources."]
    result = bot.ask(QUESTION, knobs=WRITTEN)
    assert result.refusal is not None and result.refusal.reason == "no_relevant_docs"
    assert result.refusal.stage == "generate"


FEE = [Passage(number=1, source_id="fees", text="Credit card top-ups carry a 1.5% fee.")]


@pytest.mark.parametrize(
    ("draft", "expected"),
    [
        (
            "Credit card top-ups carry a 1.5% fee [1]. This helps keep your finances healthy.",
            "Credit card top-ups carry a 1.5% fee [1].",
        ),
        ("Credit card top-ups carry a 1.5% fee [1]. Debit top-ups cost RM5.", None),  # a figure
        ("Credit card top-ups carry a 1.5% fee [1]. It does not apply to e-wallets.", None),
        (
            "Credit card top-ups carry a 1.5% fee [1]. Cash is free [1].",
            None,
        ),  # cited: misattributed
        ("This helps keep your finances healthy.", None),  # nothing grounded would be left
    ],
)
def test_prune_leaves_out_only_unsupported_uncited_remarks(
    embedder: OnnxEmbedder, draft: str, expected: str | None
) -> None:
    pruned = prune(draft, FEE, embedder, DEFAULT_MIN_SIMILARITY)
    assert (pruned[0] if pruned else None) == expected


def test_an_invented_definition_is_the_answer_and_never_left_out(embedder: OnnxEmbedder) -> None:
    draft = "Fraud is deception for personal gain. Credit card top-ups carry a 1.5% fee [1]."
    pruned = prune(draft, FEE, embedder, DEFAULT_MIN_SIMILARITY)
    assert pruned is not None and pruned[0] == "Credit card top-ups carry a 1.5% fee [1]."
    assert prune(draft, FEE, embedder, DEFAULT_MIN_SIMILARITY, answer_first=True) is None


def test_ground_answers_without_the_unsupported_remark(
    bot: Guardrag, chat: ScriptedChatModel
) -> None:
    chat.replies = [
        "FPX top-ups can take up to 30 minutes to reflect in your wallet. "
        "This ensures a smooth experience for every customer."
    ]
    result = bot.ask(QUESTION, knobs=WRITTEN)
    assert result.outcome == "answered" and "smooth" not in result.answer
    ground = next(d for d in result.trail if d.node == "ground")
    assert ground.detail["pruned"] == ["This ensures a smooth experience for every customer."]


@pytest.mark.parametrize(
    ("cut", "kept"),
    [
        ("Tap Top Up [1]. Then choose an amo", "Tap Top Up [1]."),
        ("Steps:\n1. Tap Schedule [1].\n2. Choose a date up to 12", "Steps:\n1. Tap Schedule [1]."),
        (
            "Freeze the card [1].\n- Tap Card > Freeze [2]\n- Then ord",
            "Freeze the card [1].\n- Tap Card > Freeze [2]",
        ),
        (
            "You can schedule a monthly transfer [1]. Follow these steps:\n\n1. On the",
            "You can schedule a monthly transfer [1].",
        ),
        (
            "Top-ups are free [1]. Cash top-ups cost RM1 [2].",
            "Top-ups are free [1]. Cash top-ups cost RM1 [2].",
        ),
        ("The fee is RM0.50 each [2]", "The fee is RM0.50 each [2]"),  # nothing before it is whole
    ],
)
def test_a_draft_cut_by_the_token_cap_loses_only_its_unfinished_sentence(
    cut: str, kept: str
) -> None:
    assert finished(cut) == kept
