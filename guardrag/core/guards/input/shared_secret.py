"""A PIN, password or one-time code written into the message ("my OTP is 482913 but it says
expired", "PIN: 8812"): refused, with the reminder never to share one, and never logged; a
policy refusal (kind `policy`), since it is nearly always the customer's own code. Asking the
bot for a code is `credentials`' attack."""

from __future__ import annotations

import re

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.unit import input_rule

_F = re.IGNORECASE

# The secrets a customer might paste ("my OTP is 123456", "PIN: 0000", "password is Ab12cd").
_SECRET = (
    r"(?:pin(?: number| code)?|m-?pin|passwords?|pass ?code|passwd|otp|one[- ]time (?:password|"
    r"pin|code)|tac(?: code)?|security code|verification code|auth code|kata laluan|nombor pin|"
    r"kod (?:otp|tac|pin|pengesahan|keselamatan))"
)
VOLUNTEERED = re.compile(
    rf"\b{_SECRET}(?:\s+(?:saya|aku|kami|is|was|ialah|adalah))?\s*(?:is|was|are|=|:|-|ialah|"
    r"adalah)?\s*[\"'“‘]?(?P<value>(?<![\w])\d{4,8}(?![\d/.,:]\d)(?!\w))|"
    rf"\b{_SECRET}(?:\s+(?:saya|aku))?\s*(?:is|was|=|:|ialah|adalah)\s*[\"'“‘]?"
    r"(?P<token>(?=[^\s\"'”’]*\d)(?=[^\s\"'”’]*[a-z])[^\s\"'”’]{6,64})",
    _F,
)


def detect_shared_secret(norm: Normalized) -> GuardFinding | None:
    """SHARED_SECRET when a credential cue is followed by a plausible value (masked)."""
    for label, view in norm.word_views():
        if label == "de-obfuscated text":
            continue  # leetspeak folding would turn digits into letters
        match = VOLUNTEERED.search(view)
        if match:
            group = "value" if match.group("value") else "token"
            cue = view[match.start() : match.start(group)].strip()
            return finding(
                RefusalReason.SHARED_SECRET,
                "shared_secret.volunteered",
                f"{cue!r} followed by a {len(match.group(group))}-character value (masked) "
                f"in {label}",
            )
    return None


GUARD = input_rule(
    "shared_secret", "SharedSecret", detect_shared_secret, (RefusalReason.SHARED_SECRET,)
)
