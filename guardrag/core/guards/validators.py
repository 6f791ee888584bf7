"""Our rules as guardrails-ai validators (registered locally, no Hub).

Each validator wraps one detector and reports its `GuardFinding` in `FailResult.metadata`.
Input validators share one normalisation per call through the `metadata` dict that
`Guard.validate(..., metadata=...)` hands to every validator; called on their own (e.g. in
someone else's Guard) they normalise the value themselves. Output validators read `sources`
and `prompts` from the same metadata.

`raise_finding` is the on-fail handler InputGuard/OutputGuard install: it raises
`GuardTripped` carrying the finding, which stops the (sequential) validator run at the first
failure and hands the finding back to the caller's thread without touching shared state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.framework import (
    FailResult,
    PassResult,
    ValidationResult,
    Validator,
    register_validator,
)
from guardrag.core.guards.input.credentials import detect_credentials
from guardrag.core.guards.input.harmful import detect_harmful
from guardrag.core.guards.input.injection import detect_injection
from guardrag.core.guards.input.jailbreak import detect_jailbreak
from guardrag.core.guards.input.privacy import detect_privacy_request
from guardrag.core.guards.input.profanity import detect_profanity
from guardrag.core.guards.input.semantic import SemanticDetector, default_embedder, detector_for
from guardrag.core.guards.output import unsourced_data as output_rules
from guardrag.core.guards.shared.learned import LearnedInjection
from guardrag.core.guards.shared.normalize import INVISIBLE, Normalized, normalize
from guardrag.core.guards.shared.sensitive_data import detect_payment_data, detect_personal_data

#: metadata key under which InputGuard passes the shared `NormalizedCache`.
NORMALIZED_KEY = "guardrag_normalized"
#: metadata key under which InputGuard passes the `SemanticContext`.
SEMANTIC_KEY = "guardrag_semantic"
SOURCES_KEY = "sources"
PROMPTS_KEY = "prompts"

Detector = Callable[[Normalized], GuardFinding | None]


class GuardTripped(Exception):
    """Raised by `raise_finding`: carries the first failing validator's finding."""

    def __init__(self, found: GuardFinding) -> None:
        super().__init__(f"{found.reason.value}: {found.rule}")
        self.finding = found


def raise_finding(value: Any, result: FailResult) -> Any:
    """guardrails on_fail handler (value, FailResult) -> never returns."""
    del value
    raise GuardTripped(GuardFinding.from_metadata(result.metadata or {}))


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


def _semantic_context(metadata: dict[str, Any]) -> SemanticContext:
    context = metadata.get(SEMANTIC_KEY)
    if isinstance(context, SemanticContext):
        return context
    return SemanticContext(detector_for(default_embedder()))


def _normalized(value: Any, metadata: dict[str, Any]) -> Normalized:
    cache = metadata.get(NORMALIZED_KEY)
    if isinstance(cache, NormalizedCache) and cache.text == value:
        return cache.get()
    return normalize(str(value))


def _result(found: GuardFinding | None) -> ValidationResult:
    if found is None:
        return PassResult()
    return FailResult(
        error_message=f"{found.reason.value} ({found.rule}): {found.detail}",
        metadata=found.to_metadata(),
    )


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


class _DetectorValidator(Validator):
    """Runs one input detector on the shared normalisation."""

    def detect(self, norm: Normalized) -> GuardFinding | None:
        raise NotImplementedError

    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        return _result(self.detect(_normalized(value, metadata)))


@register_validator(name="guardrag/input_shape", data_type="string")
class InputShape(Validator):
    """EMPTY_INPUT for blank (or invisible-only) text, INPUT_TOO_LONG past `max_chars`."""

    def __init__(self, max_chars: int = 2000, on_fail: Any = None, **kwargs: Any) -> None:
        super().__init__(on_fail=on_fail, max_chars=max_chars, **kwargs)
        self.max_chars = max_chars

    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        return _result(check_shape("" if value is None else str(value), self.max_chars))


@register_validator(name="guardrag/prompt_injection", data_type="string")
class PromptInjection(_DetectorValidator):
    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_injection(norm)


@register_validator(name="guardrag/jailbreak", data_type="string")
class Jailbreak(_DetectorValidator):
    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_jailbreak(norm)


@register_validator(name="guardrag/payment_data", data_type="string")
class PaymentData(_DetectorValidator):
    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_payment_data(norm)


@register_validator(name="guardrag/credentials", data_type="string")
class Credentials(_DetectorValidator):
    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_credentials(norm)


@register_validator(name="guardrag/personal_data", data_type="string")
class PersonalData(_DetectorValidator):
    """PII written into the question (e-mail, phone, NRIC, passport)."""

    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_personal_data(norm)


@register_validator(name="guardrag/privacy_request", data_type="string")
class PrivacyRequest(_DetectorValidator):
    """A request for a third party's personal data."""

    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_privacy_request(norm)


@register_validator(name="guardrag/harmful_request", data_type="string")
class HarmfulRequest(_DetectorValidator):
    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_harmful(norm)


@register_validator(name="guardrag/profanity", data_type="string")
class Profanity(_DetectorValidator):
    def detect(self, norm: Normalized) -> GuardFinding | None:
        return detect_profanity(norm)


@register_validator(name="guardrag/semantic_intent", data_type="string")
class SemanticIntent(Validator):
    """Embedding similarity to attack exemplars (the most expensive check: one MiniLM
    embedding, skipped when InputGuard passes the question's vector). On its own, in
    someone else's Guard, it loads the project's embedder once per process."""

    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        context = _semantic_context(metadata)
        return _result(context.detector.detect(_normalized(value, metadata), context.vector))


@register_validator(name="guardrag/learned_injection", data_type="string")
class LearnedIntent(Validator):
    """The learned injection classifier (guards/shared/learned.py): the message and, when it is
    longer than a sentence, each sentence; shares the semantic detector's vector."""

    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        context = _semantic_context(metadata)
        return _result(context.learned.detect(_normalized(value, metadata), context.vector))


#: Input order decides the reason when several rules fire (all are linear-time regex
#: passes over one shared normalisation, so cost barely differs). Jailbreak goes first
#: because its markers are the more specific ("DAN", "no restrictions") and a jailbreak
#: usually also contains generic injection phrasing; attacks go before the data rules so an
#: attack that also carries a number is reported as the attack.
INPUT_VALIDATORS: tuple[type[Validator], ...] = (
    Jailbreak,
    PromptInjection,
    PaymentData,
    Credentials,
    PersonalData,
    PrivacyRequest,
    HarmfulRequest,
    Profanity,
)
INPUT_DETECTORS: tuple[Detector, ...] = (
    detect_jailbreak,
    detect_injection,
    detect_payment_data,
    detect_credentials,
    detect_personal_data,
    detect_privacy_request,
    detect_harmful,
    detect_profanity,
)
#: Values the question carries (cards, phones, e-mails ...): in `pii="redact"` mode they are
#: masked by `InputGuard.redact` instead of refused. Requests for others' data still refuse.
REDACTABLE: frozenset[object] = frozenset(
    {PaymentData, PersonalData, detect_payment_data, detect_personal_data}
)


def _sources(metadata: dict[str, Any]) -> list[str]:
    return [str(s) for s in metadata.get(SOURCES_KEY) or []]


def _prompts(metadata: dict[str, Any]) -> list[str]:
    return [str(p) for p in metadata.get(PROMPTS_KEY) or []]


@register_validator(name="guardrag/output_markup", data_type="string")
class OutputMarkup(Validator):
    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        return _result(output_rules.check_template_tokens(str(value)))


@register_validator(name="guardrag/output_unsourced_data", data_type="string")
class OutputUnsourcedData(Validator):
    """Sensitive values and links in the answer must come from the sources."""

    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        sources = _sources(metadata)
        answer = str(value)
        return _result(
            output_rules.check_unsourced_values(answer, sources)
            or output_rules.check_unsourced_urls(answer, sources)
        )


@register_validator(name="guardrag/output_prompt_leak", data_type="string")
class OutputPromptLeak(Validator):
    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        return _result(
            output_rules.check_prompt_leak(str(value), _sources(metadata), _prompts(metadata))
        )


@register_validator(name="guardrag/output_profanity", data_type="string")
class OutputProfanity(Validator):
    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        return _result(output_rules.check_profanity(str(value)))


OUTPUT_VALIDATORS: tuple[type[Validator], ...] = (
    OutputMarkup,
    OutputUnsourcedData,
    OutputPromptLeak,
    OutputProfanity,
)
