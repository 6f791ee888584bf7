"""The shape check: EMPTY_INPUT and INPUT_TOO_LONG, decided on the raw text before anything
else. Not in `registry.GUARDS`: it takes the per-call length limit and runs before the guard
framework and normalisation, so a 1 MB paste never reaches either."""

from __future__ import annotations

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.normalize import INVISIBLE

REASONS = (RefusalReason.EMPTY_INPUT, RefusalReason.INPUT_TOO_LONG)


def check_shape(text: str, max_chars: int) -> GuardFinding | None:
    """EMPTY_INPUT / INPUT_TOO_LONG, decided on the raw text before any normalisation."""
    if len(text) > max_chars:
        return finding(
            RefusalReason.INPUT_TOO_LONG,
            "shape.too_long",
            f"{len(text)} characters > max {max_chars}",
            threshold=1.0,
        )
    if not INVISIBLE.sub("", text).strip():
        return finding(
            RefusalReason.EMPTY_INPUT, "shape.empty", "blank or invisible-only text", threshold=1.0
        )
    return None
