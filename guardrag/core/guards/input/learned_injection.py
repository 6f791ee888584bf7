"""The learned injection classifier (`shared/learned.py`) as an input guard: the message and,
when it is longer than a sentence, each sentence; it shares the semantic detector's vector."""

from __future__ import annotations

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.input.semantic import semantic_context
from guardrag.core.guards.unit import Call, GuardUnit


def _check(call: Call) -> GuardFinding | None:
    context = semantic_context(call)
    return context.learned.detect(call.norm, context.vector)


GUARD = GuardUnit(
    name="learned_injection",
    validator="LearnedIntent",
    stage="input",
    cost="model",
    reasons=(RefusalReason.PROMPT_INJECTION,),
    check=_check,
    doc=__doc__ or "",
)
