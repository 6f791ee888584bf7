"""UNSAFE_OUTPUT when the answer is profane (the input guard's word list)."""

from __future__ import annotations

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.input.profanity import find_profanity, mask_word
from guardrag.core.guards.unit import output_rule


def check_profanity(answer: str) -> GuardFinding | None:
    match = find_profanity(answer.lower())
    if match:
        return finding(
            RefusalReason.UNSAFE_OUTPUT,
            "output.profanity",
            f"profane word {mask_word(match.group(0))!r} in the answer",
        )
    return None


GUARD = output_rule("output_profanity", "OutputProfanity", lambda call: check_profanity(call.text))
