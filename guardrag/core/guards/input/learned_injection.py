"""The learned injection classifier (`shared/learned.py`) as an input guard: the message and,
when it is longer than a sentence, each sentence; it shares the semantic detector's vector."""

from __future__ import annotations

from guardrag.contract import RefusalReason
from guardrag.core.guards.input.semantic import context_check
from guardrag.core.guards.unit import input_model

GUARD = input_model(
    "learned_injection",
    "LearnedIntent",
    context_check(lambda context: context.learned),
    (RefusalReason.PROMPT_INJECTION,),
    doc=__doc__ or "",
)
