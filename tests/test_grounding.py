"""The grounding check: one test per rule, then the whole adversarial set against its targets."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from guardrag.core.embedder import Embedder, EmbedderUnavailable, OnnxEmbedder
from guardrag.core.grounding import (
    Passage,
    bound_words,
    check_grounding,
    drawn_on,
    extract_entities,
    extract_mentions,
    negation_cues,
    split_claims,
)

ROOT = Path(__file__).resolve().parents[1]

LIMITS = (
    "Kinetic Wallet accounts have a daily transfer limit of RM 5,000 and a monthly transfer limit "
    "of RM 20,000. Users who complete eKYC verification can raise the daily limit to RM 10,000."
)
RELOAD = (
    "You can reload Kinetic Wallet with a debit card, FPX online banking or DuitNow Transfer. "
    "Reloads by debit card are free; reloads by credit card carry a 1.5% fee."
)
WITHDRAW = (
    "Withdrawals are free of charge and usually arrive within 2 business days. "
    "Withdrawals to third-party bank accounts are not allowed."
)
PASSAGES = (
    Passage(1, "kinetic-limits", LIMITS),
    Passage(2, "kinetic-reload", RELOAD),
    Passage(3, "kinetic-withdraw", WITHDRAW),
)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    try:
        return OnnxEmbedder()
    except EmbedderUnavailable as exc:  # pragma: no cover - depends on the install
        pytest.skip(f"embedding model not installed: {exc}")


def _check(answer: str, embedder: Embedder, **kwargs: bool) -> tuple[bool, str]:
    report = check_grounding(answer, PASSAGES, embedder, **kwargs)
    return report.supported, report.reason


# ----------------------------------------------------------------------------- splitting


def test_split_claims_parses_every_citation_form() -> None:
    claims = split_claims(
        "Reloads are free [1]. Limits apply [1,2]. Fees vary [1][3]. See all [1-3].\n"
        "- Bullet one [2]\n* Bullet two. [2] Next sentence."
    )
    assert claims == [
        ("Reloads are free.", (1,)),
        ("Limits apply.", (1, 2)),
        ("Fees vary.", (1, 3)),
        ("See all.", (1, 2, 3)),
        ("Bullet one", (2,)),
        ("Bullet two.", (2,)),  # a citation right after the full stop belongs to the sentence
        ("Next sentence.", ()),
    ]


def test_split_claims_splits_semicolons_and_statements_but_not_lists() -> None:
    claims = split_claims(
        "Debit reloads are free; credit card reloads cost 1.5% [2]. "
        "You can pay by card, FPX, and DuitNow Transfer [2]. "
        "Rewards give cashback on QR payments [1], and transfers also earn cashback [1]."
    )
    assert [c for c, _ in claims] == [
        "Debit reloads are free",  # the uncited clause inherits the sentence's citation
        "credit card reloads cost 1.5%.",
        "You can pay by card, FPX, and DuitNow Transfer.",
        "Rewards give cashback on QR payments",
        "transfers also earn cashback.",
    ]
    assert claims[0][1] == (2,)


# ------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("RM5,000", "RM 5000"),
        ("RM 5,000", "5,000 ringgit"),
        ("MYR 5k", "RM 5,000.00"),
        ("50 sen", "RM 0.50"),
        ("3%", "3 percent"),
        ("two business days", "2 working days"),
        ("24-hour", "24 hours"),
        ("8 a.m.", "8am"),
        ("1st Oct", "1 October"),
        ("100GB", "100 GB"),
        ("30kg", "30 kg"),
        ("5Mbps", "5 mbps"),
        ("24h", "24 hours"),
        ("RM5m", "RM 5 million"),
    ],
)
def test_number_formats_normalise_to_the_same_value(a: str, b: str) -> None:
    (ma,), (mb,) = extract_mentions(a), extract_mentions(b)
    assert (ma.kind, ma.value, ma.unit) == (mb.kind, mb.value, mb.unit)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("2 days", "2 business days"),
        ("24 hours", "24 days"),
        ("RM 50", "50%"),
        ("3 months", "3 years"),
        ("128kbps", "128Mbps"),
        ("4G", "4GB"),
    ],
)
def test_different_units_stay_different(a: str, b: str) -> None:
    (ma,), (mb,) = extract_mentions(a), extract_mentions(b)
    assert (ma.kind, ma.unit) != (mb.kind, mb.unit)


def test_amounts_in_the_answer_may_be_formatted_differently(embedder: Embedder) -> None:
    ok, reason = _check(
        "The daily transfer limit is RM5000 and the monthly one RM20k [1].", embedder
    )
    assert ok, reason


def test_number_not_in_the_cited_passage_is_rejected(embedder: Embedder) -> None:
    ok, reason = _check("Credit card reloads carry a 2.5% fee [2].", embedder)
    assert not ok
    assert "number 2.5% not in passage [2]" in reason


def test_number_swapped_within_the_passage_is_rejected(embedder: Embedder) -> None:
    # RM 20,000 is in the passage, but as the monthly limit: its frequency does not match
    ok, reason = _check("The daily transfer limit is RM 20,000 [1].", embedder)
    assert not ok
    assert "number RM 20,000 not in passage [1]" in reason
    # 14 business days is in the passage, but it is what disputes take, not refunds
    passages = [
        Passage(
            1,
            "kinetic-refunds",
            "Refunds for failed reloads arrive within 3 business days. "
            "Disputes are investigated within 14 business days.",
        )
    ]
    report = check_grounding(
        "Refunds for failed reloads arrive within 14 business days [1].", passages, embedder
    )
    assert not report.supported
    assert "conflicts with passage [1], which says 3 business days" in report.reason


def test_wrong_unit_or_period_is_rejected(embedder: Embedder) -> None:
    for answer in (
        "Withdrawals usually arrive within 2 days [3].",  # calendar, not business, days
        "Kinetic Wallet has a weekly transfer limit of RM 5,000 [1].",
        "Credit card reloads carry a RM 1.50 fee [2].",
    ):
        ok, reason = _check(answer, embedder)
        assert not ok, answer
        assert "number" in reason or "frequency" in reason


def test_a_bound_on_a_figure_in_other_words_is_the_same_bound(embedder: Embedder) -> None:
    passages = [
        Passage(
            1,
            "kinetic-redeem",
            "Go to Rewards > Redeem to convert points into wallet credit at 100 points = RM1, "
            "with a minimum of 500 points per redemption.",
        )
    ]
    same = "To turn your points into wallet credit, you need at least 500 points [1]."
    report = check_grounding(same, passages, embedder)
    assert report.supported, report.reason
    flipped = "You can redeem at most 500 points per redemption [1]."
    report = check_grounding(flipped, passages, embedder)
    assert not report.supported
    assert "says 'maximum' where passage [1] says 'minimum'" in report.reason
    assert bound_words("It is up to you; at least once.") == "It is up to you; at least once."
    assert bound_words("at least 18 years, up to RM 1,500") == "minimum 18 years, maximum RM 1,500"


# ---------------------------------------------------------------- entities, negation, scope


def test_entities_ignore_sentence_starts_but_not_acronyms() -> None:
    assert extract_entities("Transfers via DuitNow go to Maybank.") == ["DuitNow", "Maybank"]
    assert extract_entities("NSRC is open daily.") == ["NSRC"]
    assert extract_entities("Reloads cost RM5000 in total.") == []


def test_wrong_entity_is_rejected(embedder: Embedder) -> None:
    ok, reason = _check(
        "You can reload with a debit card, FPX online banking or JomPAY [2].", embedder
    )
    assert not ok
    assert "entity 'JomPAY' not in passage [2]" in reason


def test_negation_cues_count_and_ignore_bounds() -> None:
    assert negation_cues("You cannot withdraw.") == 1
    assert negation_cues("Report no later than 30 days after.") == 0
    assert negation_cues("No, there is no limit.") == 1  # the leading "No," answers the question
    assert negation_cues("Promotions should avoid showing only benefits.") == 1  # a prohibition
    assert negation_cues("Never share it, not even with our staff.") == 1  # "not even" stresses


@pytest.mark.parametrize(
    ("answer", "supported"),
    [
        ("Yes, it is free to top up your wallet [1].", False),  # credit card top-ups cost 1.5%
        ("Card top-ups are free [1].", False),  # debit is free, credit is not
        ("Top-ups by FPX or debit card are free [1].", True),
        ("Top-ups are free except by credit card or at partner outlets [1].", True),
    ],
)
def test_free_claim_must_keep_the_passages_condition(
    embedder: Embedder, answer: str, supported: bool
) -> None:
    fees = Passage(
        1,
        "kw-top-up-002",
        "Fees for topping up your wallet. Top-ups by FPX online banking, debit card or DuitNow "
        "transfer are free. "
        "Credit card top-ups carry a 1.5% fee (minimum RM0.50), and cash top-ups at partner "
        "outlets cost RM1.",
    )
    auto = Passage(
        2, "kw-top-up-006", "Auto Top Up reloads your wallet from a debit card; it is free."
    )
    report = check_grounding(answer, [fees, auto], embedder)
    assert report.supported is supported, report.reason
    if not supported:
        assert "charges for some of it" in report.reason
    # a free thing passage [1] never mentions is not held to passage [1]'s fees
    assert check_grounding("Auto Top Up is free [2].", [fees, auto], embedder).supported


def test_polarity_flip_drawing_on_a_title_and_a_guideline_is_rejected(embedder: Embedder) -> None:
    """The claim's words come from the heading and the sentence together; the sentence closest
    in meaning carries the polarity ("avoid ... without" against "can ... without")."""
    guide = Passage(
        1,
        "guide-3",
        "Promotions guide > crypto. Communications about cryptoassets should avoid downplaying "
        "risks or presenting benefits without appropriate balance.",
    )
    flip = "Yes, crypto promotions can focus only on benefits without mentioning risks [1]."
    kept = "Crypto promotions should not present benefits without appropriate balance [1]."
    flipped = check_grounding(flip, [guide], embedder)
    assert not flipped.supported and "negation differs" in flipped.reason
    assert check_grounding(kept, [guide], embedder).supported


@pytest.mark.parametrize(
    "answer",
    [
        "Withdrawals to third-party bank accounts are allowed [3].",
        "Reloads by debit card are not free [2].",
        "Verified users cannot raise the daily limit to RM 10,000 [1].",
    ],
)
def test_negation_flip_is_rejected(embedder: Embedder, answer: str) -> None:
    ok, reason = _check(answer, embedder)
    assert not ok
    assert "negation differs" in reason


def test_negated_paraphrase_is_accepted(embedder: Embedder) -> None:
    ok, reason = _check("You can't withdraw to a third-party bank account [3].", embedder)
    assert ok, reason


def test_claim_from_outside_the_passages_is_rejected(embedder: Embedder) -> None:
    ok, _ = _check("Kinetic Wallet pays interest on balances above RM 5,000 [1].", embedder)
    assert not ok
    ok, _ = _check("Reloads by credit card earn double cashback on weekends [2].", embedder)
    assert not ok


def test_claim_must_be_supported_by_the_passage_it_cites(embedder: Embedder) -> None:
    ok, reason = _check("Withdrawals usually arrive within 2 business days [1].", embedder)
    assert not ok
    assert "[1]" in reason


def test_mixed_answer_fails_on_its_bad_sentence(embedder: Embedder) -> None:
    report = check_grounding(
        "Withdrawals are free of charge [3]. They usually arrive within 1 business day [3].",
        PASSAGES,
        embedder,
    )
    assert not report.supported
    assert [c.supported for c in report.claims] == [True, False]
    assert report.cited_numbers() == {3}
    assert report.score == 0.0


# ------------------------------------------------------------------------------ citations


def test_a_bracketed_year_copied_from_a_guideline_is_no_citation() -> None:
    """Guidelines stamp recommendations "[2015]"; a draft that copies the stamp cites nothing."""
    claims = split_claims("Offer an urgent chest X-ray within 2 weeks [1]. [2015]")
    assert claims[0] == ("Offer an urgent chest X-ray within 2 weeks.", (1,))
    assert all(cited in ((), (1,)) for _, cited in claims)


def test_citation_to_a_missing_passage_fails_the_whole_answer(embedder: Embedder) -> None:
    report = check_grounding(
        "Withdrawals are free of charge [3]. Reloads by debit card are free [4].",
        PASSAGES,
        embedder,
    )
    assert not report.supported
    assert report.invalid_citations == (4,)
    assert "citation [4] refers to no given passage" in report.reason


def test_uncited_claim_needs_some_passage_unless_citations_are_required(
    embedder: Embedder,
) -> None:
    answer = "Withdrawals are free of charge."
    assert _check(answer, embedder)[0]
    ok, reason = _check(answer, embedder, require_citations=True)
    assert not ok
    assert "no citation" in reason
    ok, reason = _check("Withdrawals are free [3]. Most banks credit them instantly.", embedder)
    assert not ok
    assert "uncited" in reason


def test_multi_passage_claim_is_checked_against_the_cited_passages_together(
    embedder: Embedder,
) -> None:
    ok, reason = _check(
        "Debit card reloads are free [2], and withdrawals are also free of charge [3].", embedder
    )
    assert ok, reason
    ok, reason = _check(
        "You can reload with FPX up to a daily transfer limit of RM 5,000 [1][2].", embedder
    )
    assert ok, reason


# -------------------------------------------------------------------------------- filler


def test_filler_is_ignored_but_cannot_smuggle_facts(embedder: Embedder) -> None:
    report = check_grounding(
        "Here is what I found: [3]\nWithdrawals are free of charge [3]. I hope this helps!",
        PASSAGES,
        embedder,
    )
    assert report.supported, report.reason
    assert report.ignored == ("Here is what I found:", "I hope this helps!")
    assert len(report.claims) == 1

    for smuggled in (
        "Based on the sources, Kinetic Wallet is licensed by Bank Negara Malaysia.",
        "Here is what I found for 2023: reloads by debit card are free [2].",
        "According to the provided sources, withdrawals are instant [3].",
    ):
        ok, _ = _check(smuggled, embedder)
        assert not ok, smuggled


def test_headings_are_lead_ins_not_claims(embedder: Embedder) -> None:
    report = check_grounding(
        "## Limits\n**Daily and monthly**\n- The daily transfer limit is RM 5,000 [1].",
        PASSAGES,
        embedder,
    )
    assert report.supported, report.reason
    assert report.ignored == ("Limits:", "Daily and monthly:")


def test_an_answer_without_claims_is_not_grounded(embedder: Embedder) -> None:
    for answer in ("", "Here is what I found:", "[1]"):
        report = check_grounding(answer, PASSAGES, embedder)
        assert not report.supported
        assert report.score == 0.0


def test_a_question_back_is_no_answer(embedder: Embedder) -> None:
    """A passage's own "Would you like more information?" copied as the whole draft answers
    nothing; a question is still checked for the facts it carries."""
    passages = (
        *PASSAGES,
        Passage(4, "kinetic-more", "[[Would you like to know more about fees?]]"),
    )
    for answer in ("[[Would you like to know more about fees?]]", "Do you mean reloads [2]?"):
        report = check_grounding(answer, passages, embedder)
        assert not report.supported and report.reason == "answer makes no checkable claim"
    smuggled = check_grounding(
        "Did you know reloads by credit card cost 3% [2]?", PASSAGES, embedder
    )
    assert not smuggled.supported and "3%" in smuggled.reason
    answered = "Reloads by credit card carry a 1.5% fee [2]. Would you like to know more?"
    assert check_grounding(answered, PASSAGES, embedder).supported


def test_report_of_a_supported_answer(embedder: Embedder) -> None:
    report = check_grounding(
        "The daily transfer limit is RM 5,000 [1]. Debit card reloads are free [2].",
        PASSAGES,
        embedder,
    )
    assert report.supported, report.reason
    assert report.cited_numbers() == {1, 2}
    assert report.score == min(c.similarity for c in report.claims) > 0.5
    first = report.claims[0]
    assert (first.best_passage, first.numbers_ok, first.entities_ok) == (1, True, True)
    assert first.reason == "supported by passage [1]"


# ----------------------------------------------------------------------------- data sets


def _score_module() -> ModuleType:
    path = ROOT / "scripts" / "score_grounding.py"
    spec = importlib.util.spec_from_file_location("score_grounding", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _assert_targets(cases: list[Any], embedder: Embedder) -> None:
    misses = []
    for case in cases:
        report = check_grounding(case.answer, case.passages, embedder)
        if case.known_gap:
            continue
        if report.supported != (case.expected == "supported"):
            misses.append((case.id, case.expected, report.reason))
    bad = [c for c in cases if c.expected == "unsupported" and not c.known_gap]
    good = [c for c in cases if c.expected == "supported"]
    missed_bad = [m for m in misses if m[1] == "unsupported"]
    missed_good = [m for m in misses if m[1] == "supported"]
    assert not missed_bad, f"unsupported answers let through: {missed_bad}"
    assert len(missed_good) <= 0.05 * len(good), f"correct answers rejected: {missed_good}"
    assert bad and good


@pytest.mark.slow
def test_adversarial_set_meets_its_targets(embedder: Embedder) -> None:
    score = _score_module()
    cases = score.load_adversarial()
    families = {c.family for c in cases if c.expected == "unsupported" and not c.known_gap}
    assert len(cases) >= 60
    assert sum(c.expected == "unsupported" for c in cases) >= 40
    assert sum(c.expected == "supported" for c in cases) >= 30
    assert {
        "swapped_number",
        "wrong_entity",
        "uncited_outside_claim",
        "claim_from_outside_passages",
        "citation_to_missing_passage",
        "negation_flip",
        "mixed",
        "wrong_unit_period",
    } <= families
    _assert_targets(cases, embedder)


@pytest.mark.slow
def test_real_kb_text_meets_the_targets(embedder: Embedder) -> None:
    score = _score_module()
    if not (score.GUIDELINES.is_file() or score.FAQ.is_file()):
        pytest.skip(f"shared seed data not present under {score.SEEDS}")
    _assert_targets(score.kb_cases(), embedder)


CRYPTO = [
    Passage(
        1,
        "crypto_1",
        "Firms offering cryptoasset services should provide clear, prominent risk warnings.",
    ),
    Passage(
        2,
        "crypto_2",
        "Risk warnings should help retail consumers understand the potential for significant loss.",
    ),
    Passage(3, "promos", "Financial promotions must be fair, clear and not misleading."),
]


@pytest.mark.parametrize(
    ("answer", "sources"),
    [
        (  # one uncited claim combining two passages cites both
            "Clear and prominent risk warnings help retail consumers understand the potential "
            "for significant loss.",
            {1, 2},
        ),
        ("Risk warnings should help retail consumers understand the potential for loss.", {2}),
        ("Risk warnings should help retail consumers understand significant loss [2].", {2}),
    ],
)
def test_an_answer_cites_every_passage_it_draws_on(
    embedder: OnnxEmbedder, answer: str, sources: set[int]
) -> None:
    report = check_grounding(answer, CRYPTO, embedder)
    assert report.supported, report.reason
    assert drawn_on(report, CRYPTO) == sources
