"""InputGuard: the first node's verdict on a customer question."""

from __future__ import annotations

import threading

from guardrails import Guard

from guardrag.guards.finding import GuardFinding
from guardrag.guards.validators import (
    INPUT_DETECTORS,
    INPUT_VALIDATORS,
    NORMALIZED_KEY,
    GuardTripped,
    NormalizedCache,
    check_shape,
    raise_finding,
)


class InputGuard:
    """Checks the shape (empty / too long), then runs the input validators in order through
    a guardrails `Guard`; returns the first finding, or None when the question may go on.

    Build once and share: each thread lazily gets its own `Guard` (guardrails keeps per-call
    history on the Guard, so sharing one across threads would interleave it); the validators
    themselves are stateless. `via_guardrails=False` runs the same detectors directly, for
    latency comparisons; the verdicts are identical.
    """

    def __init__(self, max_chars: int = 2000, *, via_guardrails: bool = True) -> None:
        if max_chars < 1:
            raise ValueError("max_chars must be >= 1")
        self.max_chars = max_chars
        self.via_guardrails = via_guardrails
        self._local = threading.local()
        if via_guardrails:
            self._guard()  # pay the build cost now, not on the first question

    def _guard(self) -> Guard:
        guard: Guard | None = getattr(self._local, "guard", None)
        if guard is None:
            validators = [cls(on_fail=raise_finding) for cls in INPUT_VALIDATORS]
            guard = Guard(name="guardrag-input", history_max_length=1).use(*validators)
            self._local.guard = guard
        return guard

    def check(self, text: str, max_chars: int | None = None) -> GuardFinding | None:
        """None = pass; otherwise the first rule that fired (its detail is masked).

        `max_chars` overrides the guard's length limit for this call (a per-run knob).
        """
        text = "" if text is None else text
        # Shape first and outside the Guard: O(1)/O(n) on the raw text, and a 1 MB paste
        # never reaches normalisation or guardrails' call logging.
        found = check_shape(text, max_chars or self.max_chars)
        if found is not None:
            return found
        cache = NormalizedCache(text)
        if not self.via_guardrails:
            return self._check_direct(cache)
        try:
            self._guard().validate(text, metadata={NORMALIZED_KEY: cache})
        except GuardTripped as tripped:
            return tripped.finding
        return None

    @staticmethod
    def _check_direct(cache: NormalizedCache) -> GuardFinding | None:
        norm = cache.get()
        for detect in INPUT_DETECTORS:
            found = detect(norm)
            if found is not None:
                return found
        return None
