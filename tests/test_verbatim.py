"""The verbatim rule, written once (guardrag.core.verbatim): the same answer for one question
and for the calibration grid's arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from guardrag.core.twins import same_answer
from guardrag.core.verbatim import (
    answers_verbatim,
    lead,
    lead_over_rivals,
    missed_part,
    why_unsure,
)


def test_the_lead_is_the_gap_to_the_runner_up_and_a_lone_candidate_leads_by_its_score() -> None:
    assert lead([0.7, 0.6]) == 0.7 - 0.6
    assert lead([0.7]) == 0.7
    assert lead([]) == 0.0


def test_an_faq_entry_answers_verbatim_only_above_the_threshold_and_ahead_by_the_margin() -> None:
    assert answers_verbatim(True, 0.6, 0.1, 0.48, 0.09)
    assert not answers_verbatim(True, 0.6, 0.05, 0.48, 0.09)  # a close runner-up
    assert not answers_verbatim(True, 0.4, 0.4, 0.48, 0.09)  # below the KB's threshold
    assert not answers_verbatim(False, 0.9, 0.9, 0.48, 0.09)  # a document passage


def test_an_unsure_entry_is_explained_by_the_part_of_the_rule_it_misses() -> None:
    assert why_unsure(0.456, 0.2, 0.481, 0.09, "b") == (
        "scores 0.456, under the verbatim threshold 0.481"
    )
    assert why_unsure(0.58, 0.0018, 0.481, 0.09, "b") == "leads b by 0.002, under faq_margin 0.09"
    assert why_unsure(0.58, 0.2, 0.481, 0.09, "b") == ""  # it answers verbatim
    assert [missed_part(0.456, 0.2, 0.481, 0.09), missed_part(0.58, 0.0018, 0.481, 0.09)] == [
        "threshold",
        "lead",
    ]
    assert missed_part(0.58, 0.2, 0.481, 0.09) is None


def test_arrays_decide_as_single_questions_do() -> None:
    rows = [(True, 0.6, 0.1), (True, 0.6, 0.05), (True, 0.4, 0.4), (False, 0.9, 0.9)]
    is_faq, score, gap = (np.array(column) for column in zip(*rows, strict=True))
    grid = answers_verbatim(is_faq, score, gap, 0.48, 0.09)
    assert grid.tolist() == [answers_verbatim(f, s, g, 0.48, 0.09) for f, s, g in rows]


@dataclass(frozen=True)
class Entry:
    score: float
    answer: str


ORDER = (
    "Go to Card > Order Physical Card and pay the one-time RM12 issuance fee. The card arrives "
    "within 5-7 working days in Peninsular Malaysia and 7-14 working days in Sabah and Labuan."
)
LOST = (
    "Freeze it immediately under Card > Freeze Card, then order a replacement for RM12. The "
    "replacement card arrives in 5-7 working days (7-14 working days in Sabah and Labuan)."
)
EXPIRY = "We post a free replacement card about 30 days before expiry; activate it in the app."


def test_a_runner_up_giving_the_same_answer_is_no_rival() -> None:
    asked = "When does the physical card arrive in Sabah?"
    assert same_answer(asked, ORDER, LOST)  # the same sentence's words and figures
    ranked = [Entry(0.60, ORDER), Entry(0.53, LOST), Entry(0.47, EXPIRY)]
    assert lead_over_rivals(asked, ranked) == (0.60 - 0.47, 1)
    assert not same_answer(asked, ORDER, EXPIRY)  # another answer: the runner-up is a rival
    assert lead_over_rivals(asked, [Entry(0.60, ORDER), Entry(0.53, EXPIRY)]) == (0.60 - 0.53, 0)
    # the same figure about another thing is another answer: the sentences hold other words
    atm = "What does a cash withdrawal at an ATM cost?"
    top_up = "Cash top-ups at 7-Eleven cost RM1 each."
    withdrawal = "Each ATM cash withdrawal in Malaysia costs RM1."
    assert not same_answer(atm, top_up, withdrawal)
    # the same words without a figure are not taken for the same answer
    close = "How do I close my account?"
    assert not same_answer(close, "Close your account under Profile.", "You can't close it.")
    assert lead_over_rivals(close, []) == (0.0, 0)


def test_a_name_s_number_or_the_question_s_own_figure_makes_no_twin() -> None:
    asked = "Can my pet get COVID-19?"
    one = "Currently, there is no evidence that a pet can become sick with COVID-19."
    two = "Some animals can be infected with COVID-19, but pets do not spread it."
    assert not same_answer(asked, one, two)
    asked = "Is the 5-day pass refundable after 2 days?"
    assert not same_answer(
        asked, "The 5-day pass is refundable.", "A 5-day pass is not refundable."
    )
