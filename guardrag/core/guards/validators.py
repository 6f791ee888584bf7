"""Our guards as guardrails-ai validators (registered locally, no Hub), generated from
`registry.GUARDS`: one validator class per guard, named by its unit (`guardrag/<name>`,
class `unit.validator`, e.g. `validators.PromptInjection`).

Each validator runs its guard's check and reports the `GuardFinding` in
`FailResult.metadata`. InputGuard and OutputGuard hand every validator of a call one `Call`
through the `metadata` dict of `Guard.validate(..., metadata=...)`, so the question is
normalised once per call; used on their own (e.g. in someone else's Guard) the validators
build it from the value and the `sources` / `prompts` metadata.

`raise_finding` is the on-fail handler InputGuard/OutputGuard install: it raises
`GuardTripped` carrying the finding, which stops the (sequential) validator run at the first
failure and hands the finding back to the caller's thread without touching shared state.
"""

from __future__ import annotations

from typing import Any

from guardrag.core.guards import registry
from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.framework import (
    FailResult,
    PassResult,
    ValidationResult,
    Validator,
    register_validator,
)
from guardrag.core.guards.input.shape import check_shape
from guardrag.core.guards.unit import Call, GuardUnit, Stage

#: metadata key under which InputGuard and OutputGuard pass the call's shared `Call`.
CALL_KEY = "guardrag_call"
SOURCES_KEY = "sources"
PROMPTS_KEY = "prompts"


class GuardTripped(Exception):
    """Raised by `raise_finding`: carries the first failing validator's finding."""

    def __init__(self, found: GuardFinding) -> None:
        super().__init__(f"{found.reason.value}: {found.rule}")
        self.finding = found


def raise_finding(value: Any, result: FailResult) -> Any:
    """guardrails on_fail handler (value, FailResult) -> never returns."""
    del value
    raise GuardTripped(GuardFinding.from_metadata(result.metadata or {}))


def _result(found: GuardFinding | None) -> ValidationResult:
    if found is None:
        return PassResult()
    return FailResult(
        error_message=f"{found.reason.value} ({found.rule}): {found.detail}",
        metadata=found.to_metadata(),
    )


def _call(value: Any, metadata: dict[str, Any]) -> Call:
    """The caller's `Call` when it is for this value, else one built from the metadata."""
    text = str(value)
    call = metadata.get(CALL_KEY)
    if isinstance(call, Call) and call.text == text:
        return call
    sources = [str(s) for s in metadata.get(SOURCES_KEY) or []]
    prompts = [str(p) for p in metadata.get(PROMPTS_KEY) or []]
    return Call(text, sources=sources, prompts=prompts)


@register_validator(name="guardrag/input_shape", data_type="string")
class InputShape(Validator):
    """EMPTY_INPUT for blank (or invisible-only) text, INPUT_TOO_LONG past `max_chars`.

    InputGuard runs the same check before its Guard; this validator is for other Guards."""

    def __init__(self, max_chars: int = 2000, on_fail: Any = None, **kwargs: Any) -> None:
        super().__init__(on_fail=on_fail, max_chars=max_chars, **kwargs)
        self.max_chars = max_chars

    def _validate(self, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        return _result(check_shape("" if value is None else str(value), self.max_chars))


def validator_for(unit: GuardUnit) -> type[Validator]:
    """A guardrails-ai validator class running `unit.check`, registered as `guardrag/<name>`."""

    def _validate(self: Validator, value: Any, metadata: dict[str, Any]) -> ValidationResult:
        del self
        return _result(unit.check(_call(value, metadata)))

    namespace = {"__doc__": unit.doc or None, "__module__": __name__, "_validate": _validate}
    cls = type(unit.validator, (Validator,), namespace)
    return register_validator(name=f"guardrag/{unit.name}", data_type="string")(cls)


#: One validator class per registered guard, by class name.
GENERATED: dict[str, type[Validator]] = {
    unit.validator: validator_for(unit) for unit in registry.units()
}


def validators(stage: Stage) -> list[tuple[GuardUnit, type[Validator]]]:
    """The guards of `stage` with their validator classes, in run order."""
    return [(unit, GENERATED[unit.validator]) for unit in registry.at(stage)]


def __getattr__(name: str) -> type[Validator]:
    """`validators.PromptInjection` and the other generated classes, by their names."""
    try:
        return GENERATED[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
