"""A guard as one unit: what it reads, which reasons it refuses with, what it costs.

Every module of `guards/input/` and `guards/output/` that is a guard defines one `GUARD`, and
`registry.GUARDS` names them in the order they run. `InputGuard`, `OutputGuard` and their
guardrails-ai validators are built from that list, so adding a guard is its module and one
line there.

A unit names its refusal reasons; their kind and customer message are the reason's, read from
the public contract (`REASON_KIND`) and `config/messages.py`, because several guards refuse
with one reason (three with PROMPT_INJECTION, every output guard with UNSAFE_OUTPUT) and the
customer reads one message per reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from guardrag.config.messages import REFUSAL_MESSAGES
from guardrag.contract import REASON_KIND, RefusalKind, RefusalReason
from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.shared.normalize import Normalized, normalize

if TYPE_CHECKING:
    import numpy as np

    from guardrag.core.guards.input.semantic import SemanticDetector
    from guardrag.core.guards.shared.learned import LearnedInjection

#: Where a guard runs: on the customer's question, or on the answer before it is shown.
Stage = Literal["input", "output"]
#: "rule": regex passes over the shared normalisation (microseconds); "model": an embedding
#: and a classifier (milliseconds), run after every rule and only when the guard has a model.
Cost = Literal["rule", "model"]


class NormalizedCache:
    """Normalises lazily, once per call: the shape check runs before anyone pays for it."""

    __slots__ = ("_norm", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._norm: Normalized | None = None

    def get(self) -> Normalized:
        if self._norm is None:
            self._norm = normalize(self.text)
        return self._norm


@dataclass(frozen=True)
class SemanticContext:
    """The detector InputGuard built and, when the caller has it, the question's vector."""

    detector: SemanticDetector
    vector: np.ndarray | None = None

    @property
    def learned(self) -> LearnedInjection:
        if self.detector.learned is None:
            raise ValueError("this semantic detector has no learned injection classifier")
        return self.detector.learned


class Call:
    """What a guard reads on one call: the text, its normalisation (shared by every guard of
    the call, computed on first use), and what the caller passed along: the semantic detector
    and question vector (input), the sources and confidential prompts (output)."""

    __slots__ = ("_cache", "prompts", "semantic", "sources", "text")

    def __init__(
        self,
        text: str,
        cache: NormalizedCache | None = None,
        *,
        semantic: SemanticContext | None = None,
        sources: Sequence[str] = (),
        prompts: Sequence[str] = (),
    ) -> None:
        self.text = text
        self._cache = cache if cache is not None and cache.text == text else None
        self.semantic = semantic
        self.sources = sources
        self.prompts = prompts

    @property
    def norm(self) -> Normalized:
        if self._cache is None:
            self._cache = NormalizedCache(self.text)
        return self._cache.get()


Check = Callable[[Call], GuardFinding | None]


@dataclass(frozen=True)
class GuardUnit:
    """One guard: its check, the reasons it refuses with, where it runs and what it costs.

    `name` is its guardrails-ai validator's (`guardrag/<name>`) and `validator` that class's
    name (`validators.py` generates it); `redactable` guards find values the question carries,
    which `pii="redact"` masks instead of refusing.
    """

    name: str
    validator: str
    stage: Stage
    cost: Cost
    reasons: tuple[RefusalReason, ...]
    check: Check
    redactable: bool = False
    doc: str = ""

    @property
    def kinds(self) -> dict[RefusalReason, RefusalKind]:
        """Each reason's kind, from the contract."""
        return {reason: REASON_KIND[reason] for reason in self.reasons}

    @property
    def messages(self) -> dict[RefusalReason, str]:
        """Each reason's customer message (a template `refusal_message` fills)."""
        return {reason: REFUSAL_MESSAGES[reason] for reason in self.reasons}


def on_question(detect: Callable[[Normalized], GuardFinding | None]) -> Check:
    """The check of an input rule that reads only the normalised question."""

    def check(call: Call) -> GuardFinding | None:
        return detect(call.norm)

    check.__name__ = getattr(detect, "__name__", "check")
    return check


def input_rule(
    name: str,
    validator: str,
    detect: Callable[[Normalized], GuardFinding | None],
    reasons: tuple[RefusalReason, ...],
    *,
    redactable: bool = False,
    doc: str = "",
) -> GuardUnit:
    """A cheap input guard: one detector over the shared normalisation."""
    return GuardUnit(
        name=name,
        validator=validator,
        stage="input",
        cost="rule",
        reasons=reasons,
        check=on_question(detect),
        redactable=redactable,
        doc=doc or (detect.__doc__ or "").strip(),
    )


def input_model(
    name: str, validator: str, check: Check, reasons: tuple[RefusalReason, ...], doc: str = ""
) -> GuardUnit:
    """An input guard that embeds (`call.semantic`): runs after every rule, and only in an
    InputGuard built with its semantic detector."""
    return GuardUnit(
        name=name,
        validator=validator,
        stage="input",
        cost="model",
        reasons=reasons,
        check=check,
        doc=doc,
    )


def output_rule(
    name: str,
    validator: str,
    check: Check,
    doc: str = "",
    reasons: tuple[RefusalReason, ...] = (RefusalReason.UNSAFE_OUTPUT,),
) -> GuardUnit:
    """An output guard refusing with UNSAFE_OUTPUT (or `reasons`): `check` reads the answer
    (`call.text`) and, when it needs them, `call.sources` and `call.prompts`."""
    return GuardUnit(
        name=name,
        validator=validator,
        stage="output",
        cost="rule",
        reasons=reasons,
        check=check,
        doc=doc,
    )
