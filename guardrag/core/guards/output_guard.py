"""OutputGuard: the last node's verdict on an answer before it reaches the customer."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.framework import Guard
from guardrag.core.guards.unit import Call
from guardrag.core.guards.validators import CALL_KEY, GuardTripped, raise_finding, validators


class OutputGuard:
    """UNSAFE_OUTPUT when the answer leaks, invents sensitive data or links, or is profane:
    the output guards of `registry.GUARDS`, in order.

    `sources` are the passages the answer was built from (FAQ answers, chunks); `prompts`
    are the confidential instructions the model saw (system prompt, templates). Put
    sanctioned verbatim replies in quotes inside the prompt, or leave them out of `prompts`.
    Thread-safe the same way as InputGuard (one `Guard` per thread).
    """

    def __init__(self, *, via_guardrails: bool = True) -> None:
        self.via_guardrails = via_guardrails
        self._guards = validators("output")
        self._local = threading.local()
        if via_guardrails:
            self._guard()

    def _guard(self) -> Guard:
        guard: Guard | None = getattr(self._local, "guard", None)
        if guard is None:
            used = [cls(on_fail=raise_finding) for _, cls in self._guards]
            guard = Guard(name="guardrag-output", history_max_length=1).use(*used)
            self._local.guard = guard
        return guard

    def check(
        self, answer: str, sources: Sequence[str], prompts: Sequence[str]
    ) -> GuardFinding | None:
        """None = the answer may be shown; otherwise the first rule that fired."""
        if not answer or not answer.strip():
            return None  # nothing to leak; the pipeline decides what an empty answer means
        sources = [s for s in sources if s]
        prompts = [p for p in prompts if p]
        call = Call(answer, sources=sources, prompts=prompts)
        if not self.via_guardrails:
            for unit, _ in self._guards:
                found = unit.check(call)
                if found is not None:
                    return found
            return None
        try:
            self._guard().validate(answer, metadata={CALL_KEY: call})
        except GuardTripped as tripped:
            return tripped.finding
        return None
