"""The one result type every guard returns: what fired, how strongly, and why (auditable)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guardrag.contract import RefusalReason

#: Rules are binary today; they report a strength per rule and cross this bar. A later
#: learned detector (embeddings) reports graded scores against its own threshold.
RULE_THRESHOLD = 0.5


@dataclass(frozen=True)
class GuardFinding:
    """A guard's verdict that the text must be refused.

    `detail` is written to the audit log: it never carries raw PII, card numbers or secrets
    (detectors mask values before building it).
    """

    reason: RefusalReason
    rule: str
    score: float
    threshold: float
    detail: str

    def to_metadata(self) -> dict[str, Any]:
        """Plain-data form, carried through guardrails' FailResult.metadata."""
        return {
            "reason": self.reason.value,
            "rule": self.rule,
            "score": self.score,
            "threshold": self.threshold,
            "detail": self.detail,
        }

    @classmethod
    def from_metadata(cls, meta: dict[str, Any]) -> GuardFinding:
        return cls(
            reason=RefusalReason(meta["reason"]),
            rule=str(meta["rule"]),
            score=float(meta["score"]),
            threshold=float(meta["threshold"]),
            detail=str(meta["detail"]),
        )


def finding(
    reason: RefusalReason,
    rule: str,
    detail: str,
    score: float = 1.0,
    threshold: float = RULE_THRESHOLD,
) -> GuardFinding:
    """Shorthand used by the rule modules."""
    return GuardFinding(reason=reason, rule=rule, score=score, threshold=threshold, detail=detail)
