"""Payment data written into the question: a card number, CVV, IBAN or bank account."""

from __future__ import annotations

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.shared.sensitive_data import first_value, iter_payment
from guardrag.core.guards.unit import input_rule


def detect_payment_data(norm: Normalized) -> GuardFinding | None:
    """PAYMENT_DATA when a Luhn-valid card number, a CVV value, a valid IBAN or a bank
    account number is written in the question."""
    value = first_value(norm, iter_payment)
    if value is None:
        return None
    return finding(
        RefusalReason.PAYMENT_DATA,
        f"payment.{value.kind}",
        f"{value.kind} {value.masked} in the question",
    )


GUARD = input_rule(
    "payment_data",
    "PaymentData",
    detect_payment_data,
    (RefusalReason.PAYMENT_DATA,),
    redactable=True,
)
