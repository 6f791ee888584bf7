"""UNSAFE_OUTPUT when the answer is profane (the input guard's word list); UNSAFE_SOURCE when
the profane word is the KB's own (a source holds it: a forum answer served as written), which
is the operator's entry to mend, not an attack on the bot."""

from __future__ import annotations

import re
from collections.abc import Sequence

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.input.profanity import find_profanity, mask_word
from guardrag.core.guards.unit import output_rule


def check_profanity(answer: str, sources: Sequence[str] = ()) -> GuardFinding | None:
    match = find_profanity(answer.lower())
    if not match:
        return None
    word = match.group(0)
    own = re.compile(rf"\b{re.escape(word)}\b")
    if any(own.search(source.lower()) for source in sources):
        return finding(
            RefusalReason.UNSAFE_SOURCE,
            "output.profanity",
            f"profane word {mask_word(word)!r} in the KB's own text",
        )
    return finding(
        RefusalReason.UNSAFE_OUTPUT,
        "output.profanity",
        f"profane word {mask_word(word)!r} in the answer",
    )


GUARD = output_rule(
    "output_profanity",
    "OutputProfanity",
    lambda call: check_profanity(call.text, call.sources),
    reasons=(RefusalReason.UNSAFE_OUTPUT, RefusalReason.UNSAFE_SOURCE),
)
