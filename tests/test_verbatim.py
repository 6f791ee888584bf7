"""The verbatim rule, written once (guardrag.core.verbatim): the same answer for one question
and for the calibration grid's arrays."""

from __future__ import annotations

import numpy as np

from guardrag.core.verbatim import answers_verbatim, lead


def test_the_lead_is_the_gap_to_the_runner_up_and_a_lone_candidate_leads_by_its_score() -> None:
    assert lead([0.7, 0.6]) == 0.7 - 0.6
    assert lead([0.7]) == 0.7
    assert lead([]) == 0.0


def test_an_faq_entry_answers_verbatim_only_above_the_threshold_and_ahead_by_the_margin() -> None:
    assert answers_verbatim(True, 0.6, 0.1, 0.48, 0.09)
    assert not answers_verbatim(True, 0.6, 0.05, 0.48, 0.09)  # a close runner-up
    assert not answers_verbatim(True, 0.4, 0.4, 0.48, 0.09)  # below the KB's threshold
    assert not answers_verbatim(False, 0.9, 0.9, 0.48, 0.09)  # a document passage


def test_arrays_decide_as_single_questions_do() -> None:
    rows = [(True, 0.6, 0.1), (True, 0.6, 0.05), (True, 0.4, 0.4), (False, 0.9, 0.9)]
    is_faq, score, gap = (np.array(column) for column in zip(*rows, strict=True))
    grid = answers_verbatim(is_faq, score, gap, 0.48, 0.09)
    assert grid.tolist() == [answers_verbatim(f, s, g, 0.48, 0.09) for f, s, g in rows]
