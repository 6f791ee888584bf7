"""InputGuard: the first node's verdict on a customer question."""

from __future__ import annotations

import threading
from typing import Any, Literal

import numpy as np

from guardrag.core.embedder import Embedder
from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.framework import Guard, Validator
from guardrag.core.guards.input.semantic import SemanticDetector, default_embedder, detector_for
from guardrag.core.guards.input.shape import check_shape
from guardrag.core.guards.shared.learned import SecondReader
from guardrag.core.guards.shared.normalize import normalize
from guardrag.core.guards.shared.sensitive_data import iter_values, mask_values
from guardrag.core.guards.unit import Call, GuardUnit, NormalizedCache, SemanticContext
from guardrag.core.guards.validators import CALL_KEY, GuardTripped, raise_finding, validators

PiiMode = Literal["block", "redact"]


class InputGuard:
    """Checks the shape (empty / too long), then runs the input guards of `registry.GUARDS`
    in order through a guardrails `Guard`; returns the first finding, or None when the
    question may go on.

    Order: the regex rules (microseconds), then the embedding-similarity detector and the
    learned injection classifier (one MiniLM embedding, ~3 ms, or none when the caller passes
    the question's vector; a message of several sentences also embeds each of them; a message
    the classifier doubts is read again by MPNet, ~75 ms, when it is installed).
    `semantic=False` leaves both out; `embedder` shares the pipeline's model (else the
    project's MiniLM is loaded once per process); `reader` is the classifier's second reader
    ("installed": MPNet's when it is in the model dir; None: MiniLM decides alone).

    `pii="redact"`: personal and payment values written in the question (phone, e-mail,
    NRIC, card ...) no longer refuse it; the caller uses `redact(text)` as the question.
    Requests for other people's data and credentials still refuse.

    Build once and share: each thread lazily gets its own `Guard` (guardrails keeps per-call
    history on the Guard, so sharing one across threads would interleave it); the validators
    themselves are stateless. `via_guardrails=False` runs the same detectors directly, for
    latency comparisons; the verdicts are identical.
    """

    def __init__(
        self,
        max_chars: int = 2000,
        *,
        via_guardrails: bool = True,
        semantic: bool = True,
        embedder: Embedder | None = None,
        pii: PiiMode = "block",
        reader: SecondReader | Literal["installed"] | None = "installed",
    ) -> None:
        if max_chars < 1:
            raise ValueError("max_chars must be >= 1")
        if pii not in ("block", "redact"):
            raise ValueError("pii must be 'block' or 'redact'")
        self.max_chars = max_chars
        self.via_guardrails = via_guardrails
        self.pii = pii
        self.semantic: SemanticDetector | None = None
        if semantic:
            self.semantic = detector_for(embedder or default_embedder(), reader)
        # the model guards (cost "model") run only with a semantic detector, after the rules
        self._guards = [
            (unit, validator)
            for unit, validator in validators("input")
            if not (pii == "redact" and unit.redactable)
            and (unit.cost == "rule" or self.semantic is not None)
        ]
        self._units: list[GuardUnit] = [unit for unit, _ in self._guards]
        self._local = threading.local()
        if via_guardrails:
            self._guard()  # pay the build cost now, not on the first question

    def _guard(self) -> Guard:
        guard: Guard | None = getattr(self._local, "guard", None)
        if guard is None:
            classes: list[type[Validator]] = [validator for _, validator in self._guards]
            used = [cls(on_fail=raise_finding) for cls in classes]
            guard = Guard(name="guardrag-input", history_max_length=1).use(*used)
            self._local.guard = guard
        return guard

    def check(
        self, text: str, max_chars: int | None = None, *, vector: np.ndarray | None = None
    ) -> GuardFinding | None:
        """None = pass; otherwise the first rule that fired (its detail is masked).

        `max_chars` overrides the guard's length limit for this call (a per-run knob);
        `vector` is the question's embedding when the caller already has it (same model).
        """
        text = "" if text is None else text
        # Shape first and outside the Guard: O(1)/O(n) on the raw text, and a 1 MB paste
        # never reaches normalisation or guardrails' call logging.
        found = check_shape(text, max_chars or self.max_chars)
        if found is not None:
            return found
        semantic = SemanticContext(self.semantic, vector) if self.semantic is not None else None
        call = Call(text, NormalizedCache(text), semantic=semantic)
        if not self.via_guardrails:
            return self._check_direct(call)
        metadata: dict[str, Any] = {CALL_KEY: call}
        try:
            self._guard().validate(text, metadata=metadata)
        except GuardTripped as tripped:
            return tripped.finding
        return None

    def _check_direct(self, call: Call) -> GuardFinding | None:
        for unit in self._units:
            found = unit.check(call)
            if found is not None:
                return found
        return None

    def check_follow_up(
        self, message: str, previous: str, max_chars: int | None = None
    ) -> GuardFinding | None:
        """A thread's follow-up read together with the question it leans on ("do that again
        but skip the selfie part" after "how do I verify my account with eKYC?"): an attack
        split across turns, or dropped by the rewrite into a standalone question, is still seen
        whole. The full check (one more embedding, paid only when a follow-up is rewritten)."""
        return self.check(f"{previous}\n{message}", (max_chars or self.max_chars) * 2)

    @staticmethod
    def redact(text: str) -> str:
        """`text` with the personal and payment values the guard would refuse replaced by
        `[kind]` ("my number is [phone]"): the question the pipeline should use in
        `pii="redact"` mode. Obfuscated values (full-width digits, zero-width joiners)
        are found on the normalised text, which is then what gets masked."""
        masked, _ = mask_values(text)
        norm = normalize(masked)
        if any(next(iter_values(view), None) for view in norm.data_views()):
            masked, _ = mask_values(norm.text)
        return masked
