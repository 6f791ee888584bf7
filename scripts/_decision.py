"""The learned answer decision, as measured (not adopted): P(the top FAQ entry answers the
question), and the cut-off on it. Used by scripts/fit_decision.py; the pipeline keeps the rules.

Whether a question gets its best FAQ entry verbatim (no model) is hand-set rules
(`guardrag.core.verbatim`: the KB's threshold and `faq_margin`, or the second opinion ranking
the entry first). This module is one small logistic model in their place, over what rerank
already knows of the top entry (`observe`): its fused score against the KB's calibrated
threshold, its lead over the first rival, how many twins gave the same answer, what the second
opinion (all-mpnet-base-v2) thinks of it, and how much of the question's words the entry holds.

It is fitted by `scripts/fit_decision.py` on many knowledge bases, each judged by a model fitted
on the others (leave-one-KB-out); the fit is written to `MODEL_PATH`, outside the repository
(report: docs/DECISION.md). The risk knob it was built for, the share of verbatim answers that
may be wrong: `cutoff` maps it to the lowest probability whose answers were wrong at most that
often in the leave-one-KB-out predictions. It did not beat the rules, and the risk it promised
on the fitting KBs did not hold on the held-out set, so it is not in the pipeline.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from guardrag.core import verbatim
from guardrag.core.kb.stats import point_text
from guardrag.core.rerank import lexical_coverage

if TYPE_CHECKING:
    from guardrag.core.kb.stats import KBStats
    from guardrag.core.second_opinion import Opinion

#: Where scripts/fit_decision.py writes the fitted model (outside the repository).
MODEL_PATH = Path(tempfile.gettempdir()) / "fit-decision" / "decision_model.json"

#: Every feature `observe` measures (a model reads some of them, named in its file).
FEATURES = (
    "score",  # the top entry's fused rerank score
    "margin",  # score minus the KB's calibrated verbatim threshold
    "lead",  # lead over the first rival (twins giving the same answer are no rivals)
    "twins",  # twins passed over on the way to that rival
    "mpnet_gap",  # second opinion: the entry's score minus the best other's (> 0: it ranks first)
    "mpnet_first",  # 1 when the second opinion ranks the entry first
    "mpnet_asked",  # 1 when the second opinion was asked (installed, no unknown name...)
    "coverage",  # the share of the question's IDF-weighted words the entry holds
    "rules_verbatim",  # 1 when the rules answer verbatim: margin >= 0 and lead >= faq_margin
    "rules_second",  # 1 when the second opinion ranks it first by faq_margin (the rules' other way)
)


class Ranked(verbatim.Ranked, Protocol):
    """A ranked entry: its score, what it says and its payload (source_id, title, text)."""

    @property
    def payload(self) -> dict[str, Any]: ...


def observe(
    question: str,
    ranked: Sequence[Ranked],
    threshold: float,
    opinion: Opinion | None,
    stats: KBStats | None,
    faq_margin: float,
) -> dict[str, float]:
    """The features of the top entry of `ranked` (best first) for `question`: what rerank has
    at hand when it decides (the rules' own verdicts among them, at `faq_margin`)."""
    top = ranked[0]
    lead, twins = verbatim.lead_over_rivals(question, ranked)
    gap, first, asked = _second_view(opinion, str(top.payload.get("source_id")))
    seen = {
        "score": float(top.score),
        "margin": float(top.score) - threshold,
        "lead": float(lead),
        "twins": float(twins),
        "mpnet_gap": gap,
        "mpnet_first": first,
        "mpnet_asked": asked,
        "coverage": float(lexical_coverage(question, [point_text(top.payload)], stats)),
    }
    return {**seen, **rules_verdicts(seen, faq_margin)}


def rules_verdicts(seen: Mapping[str, float], faq_margin: float) -> dict[str, float]:
    """The hand-set rules' two ways to answer verbatim, as features (1 or 0): the threshold and
    the lead (`verbatim.answers_verbatim`), and the second opinion ranking the entry first by
    `faq_margin` (as rerank asks it)."""
    ahead = verbatim.answers_verbatim(True, seen["margin"], seen["lead"], 0.0, faq_margin)
    second = seen["mpnet_first"] == 1.0 and seen["mpnet_gap"] >= faq_margin
    return {"rules_verbatim": float(ahead), "rules_second": float(second)}


def _second_view(opinion: Opinion | None, entry: str) -> tuple[float, float, float]:
    """(gap, first, asked): how far the second opinion puts `entry` ahead of (> 0) or behind
    (< 0) its best other candidate; 0, 0, 0 when it was not asked."""
    if opinion is None or not opinion.ranking:
        return 0.0, 0.0, 0.0
    scores = dict(opinion.ranking)
    if entry not in scores:
        return 0.0, 0.0, 1.0
    others = [s for key, s in opinion.ranking if key != entry]
    gap = scores[entry] - (max(others) if others else 0.0)
    return float(gap), float(opinion.ranking[0][0] == entry), 1.0


@dataclass(frozen=True)
class DecisionModel:
    """A logistic model over standardised features, and its risk curve: (cut-off, share of
    answers wrong at or above it) from the leave-one-KB-out predictions, cut-offs ascending."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    risk_curve: tuple[tuple[float, float], ...]
    meta: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DecisionModel:
        return cls(
            features=tuple(data["features"]),
            mean=tuple(float(x) for x in data["mean"]),
            scale=tuple(float(x) for x in data["scale"]),
            coef=tuple(float(x) for x in data["coef"]),
            intercept=float(data["intercept"]),
            risk_curve=tuple((float(c), float(r)) for c, r in data["risk_curve"]),
            meta=data.get("meta", {}),
        )

    def probability(self, features: Mapping[str, float]) -> float:
        """P(answering with the top entry is right) for the features `observe` measured."""
        z = self.intercept + sum(
            w * (float(features[name]) - m) / s
            for name, m, s, w in zip(self.features, self.mean, self.scale, self.coef, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def cutoff(self, risk: float) -> float:
        """The lowest probability whose answers (all those at or above it) were wrong at most
        `risk` of the time in the leave-one-KB-out predictions: a smaller risk, a higher
        cut-off. Above 1 (never answer) when no cut-off was that safe."""
        return cutoff_for(self.risk_curve, risk)


def cutoff_for(curve: Sequence[tuple[float, float]], risk: float) -> float:
    """The lowest cut-off of `curve` ((cut-off, share wrong at or above it) pairs) whose share
    wrong is at most `risk`; above 1 (never answer) when none is."""
    safe = [c for c, wrong in curve if wrong <= risk]
    return min(safe) if safe else 1.0 + 1e-9


@cache
def shipped() -> DecisionModel:
    """The model the fit wrote (read once per process)."""
    return DecisionModel.from_json(json.loads(MODEL_PATH.read_text(encoding="utf-8")))
