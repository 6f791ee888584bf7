"""The verbatim rule: when a ranked FAQ entry answers a question word for word, with no model.

An FAQ entry is served verbatim when it scores at least the KB's calibrated threshold and leads
its first rival by `faq_margin` (a runner-up that gives the question the same answer is no
rival: `lead_over_rivals`), in the fused ranking or, when that lead falls short, in the second
opinion's (all-mpnet-base-v2; it settles a close lead, never lifts a score below the threshold):
rerank (whole questions and each part of a several-part one),
ground's fallback from a failed draft and the calibration grid all ask these two functions, so
the rule is written once. The calibration grid passes numpy arrays (one element per question).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, overload

import numpy as np

from guardrag.core.twins import same_answer

#: Twins of the best entry passed over on the way to its first rival.
MAX_TWINS = 2
#: The second opinion's lead when it was not asked or ranks another entry first.
NOT_ASKED = float("-inf")


class Ranked(Protocol):
    """A ranked entry: its score and what it says."""

    @property
    def score(self) -> float: ...

    @property
    def answer(self) -> str: ...


def lead_over_rivals(question: str, ranked: Sequence[Ranked]) -> tuple[float, int]:
    """How far the best entry of `ranked` (best first) is ahead of its first rival, and how
    many entries before that rival give the question the same answer as the best (twins:
    `guardrag.core.twins`, no rivals); at most `MAX_TWINS` are passed over."""
    if not ranked:
        return 0.0, 0
    best = ranked[0].answer
    twins = 0
    while (
        twins < MAX_TWINS
        and 1 + twins < len(ranked)
        and same_answer(question, best, ranked[1 + twins].answer)
    ):
        twins += 1
    return lead([ranked[0].score, *(c.score for c in ranked[1 + twins : 2 + twins])]), twins


def lead(scores: Sequence[float]) -> float:
    """How far the best of `scores` (best first) is ahead of the runner-up; a lone candidate
    leads by its whole score (nothing else was found)."""
    if not scores:
        return 0.0
    return scores[0] - (scores[1] if len(scores) > 1 else 0.0)


@overload
def answers_verbatim(
    is_faq: bool,
    score: float,
    lead: float,
    threshold: float,
    margin: float,
    second_lead: float = NOT_ASKED,
) -> bool: ...
@overload
def answers_verbatim(
    is_faq: np.ndarray,
    score: np.ndarray,
    lead: np.ndarray,
    threshold: float | np.ndarray,
    margin: float,
    second_lead: float | np.ndarray = NOT_ASKED,
) -> np.ndarray: ...
def answers_verbatim(
    is_faq: Any, score: Any, lead: Any, threshold: Any, margin: float, second_lead: Any = NOT_ASKED
) -> Any:
    """Whether the top entry answers verbatim: an FAQ entry at or above the KB's threshold that
    leads the runner-up by `margin`, by the fused `lead` or the second opinion's `second_lead`
    (`NOT_ASKED` when it was not asked or ranks another entry first); bools, or numpy arrays of
    them, in and out."""
    return is_faq & (score >= threshold) & ((lead >= margin) | (second_lead >= margin))


def missed_part(score: float, lead: float, threshold: float, margin: float) -> str | None:
    """The part of the fused verbatim rule an FAQ entry misses: "threshold" (its score is under
    the KB's), "lead" (its lead over its first rival is under `margin`), None when it misses
    none."""
    if score < threshold:
        return "threshold"
    return "lead" if lead < margin else None


def why_unsure(score: float, lead: float, threshold: float, margin: float, rival: str) -> str:
    """`missed_part` in words for the trail, with its numbers ("" when it misses none)."""
    missed = missed_part(score, lead, threshold, margin)
    if missed == "threshold":
        return f"scores {score:.3f}, under the verbatim threshold {threshold:.3f}"
    if missed == "lead":
        return f"leads {rival} by {lead:.3f}, under faq_margin {margin:g}"
    return ""
