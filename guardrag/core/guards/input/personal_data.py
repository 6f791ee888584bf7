"""Personal data written into the question: an e-mail, phone, NRIC or passport number."""

from __future__ import annotations

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.shared.sensitive_data import first_value, iter_personal
from guardrag.core.guards.unit import input_rule


def detect_personal_data(norm: Normalized) -> GuardFinding | None:
    """Personal data when an e-mail, phone number, plausible MyKad NRIC or passport number is
    written in the question: the bot never needs them and must not log them. Usually the
    customer's own, so a policy refusal, not an attack (asking for someone else's is
    `privacy`'s `pii`)."""
    value = first_value(norm, iter_personal)
    if value is None:
        return None
    return finding(
        RefusalReason.PERSONAL_DATA,
        f"personal_data.{value.kind}",
        f"{value.kind} {value.masked} in the question",
    )


GUARD = input_rule(
    "personal_data",
    "PersonalData",
    detect_personal_data,
    (RefusalReason.PERSONAL_DATA,),
    redactable=True,
    doc="Personal data written into the question (e-mail, phone, NRIC, passport).",
)
