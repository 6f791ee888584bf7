"""UNSAFE_OUTPUT when the answer carries chat-template tokens (`<|im_start|>`, `[INST]` ...)."""

from __future__ import annotations

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.input.injection import CHAT_TEMPLATE
from guardrag.core.guards.unit import output_rule


def check_template_tokens(answer: str) -> GuardFinding | None:
    match = CHAT_TEMPLATE.search(answer.lower())
    if match:
        return finding(
            RefusalReason.UNSAFE_OUTPUT,
            "output.template_tokens",
            f"chat-template marker {match.group(0)[:20]!r} in the answer",
        )
    return None


GUARD = output_rule("output_markup", "OutputMarkup", lambda call: check_template_tokens(call.text))
