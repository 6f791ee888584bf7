"""What grounding returns: the verdict on each claim and on the whole answer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Passage:
    """A source passage as the model saw it: `number` is the [n] it may cite (1-based)."""

    number: int
    source_id: str
    text: str


@dataclass(frozen=True)
class ClaimSupport:
    """The verdict on one claim, with the evidence: what the audit trail shows."""

    claim: str
    cited: tuple[int, ...]
    best_passage: int | None
    similarity: float
    overlap: float
    numbers_ok: bool
    entities_ok: bool
    supported: bool
    reason: str
    facts_only: bool = False  # a lead-in ("Ways to reload:"): only its numbers/entities count

    @property
    def hard_failure(self) -> bool:
        """Failed on what no judge may overrule: a number (or its scope or condition), an
        entity, negation, a citation."""
        return not (self.numbers_ok and self.entities_ok) or "negation differs" in self.reason

    @property
    def score(self) -> float:
        """Support score: the similarity of a supported claim, 0.0 for an unsupported one."""
        return self.similarity if self.supported else 0.0


@dataclass(frozen=True)
class GroundingReport:
    """The answer is supported only if every judged claim is and every citation is valid.

    score: the lowest claim score (0.0 if any claim fails or nothing was judged).
    ignored: filler that was not judged, and lead-ins ("Ways to reload:") of which only numbers
    and entities were checked; listed so the trail is complete.
    """

    supported: bool
    score: float
    claims: tuple[ClaimSupport, ...]
    invalid_citations: tuple[int, ...]
    reason: str
    ignored: tuple[str, ...] = ()

    def cited_numbers(self) -> set[int]:
        """The passages the supported claims rest on: those they cite, or for an uncited claim
        the passage that supports it (what the answer shows as its sources)."""
        return {
            n
            for c in self.claims
            if c.supported
            for n in (c.cited or ((c.best_passage,) if c.best_passage else ()))
        }
