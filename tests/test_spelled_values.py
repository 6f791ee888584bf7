"""E-mails and phone numbers spelled out in words: the same detectors refuse them in a
question, mask them in redact mode, find them in answers and keep them out of the audit log."""

from __future__ import annotations

import pytest

from guardrag.contract import RefusalReason
from guardrag.core.audit.redact import redact
from guardrag.core.guards import InputGuard, OutputGuard
from guardrag.core.guards.shared.sensitive_data import iter_personal

SPELLED = [
    ("siti dot rahman at example dot com is my email, can you update it?", "email"),
    ("write to siti [at] example [dot] com", "email"),
    ("my mail is siti_r at gmail dot com", "email"),
    ("siti.rahman at example.com", "email"),
    ("my number is zero one two three four five six seven eight nine", "phone"),
    ("call oh one two, three four five, six seven eight nine", "phone"),
    ("012 three four five six seven eight nine", "phone"),
    ("nombor saya kosong satu dua tiga empat lima enam tujuh lapan sembilan", "phone"),
    ("plus six zero one two three four five six seven eight nine", "phone"),
]
PLAIN = [
    "I paid at lazada.com, where is my refund?",
    "I bought it at shopee dot com",
    "Can I top up at the counter at 7-Eleven?",
    "How do I look at my transactions?",
    "I have one or two questions about three four five items",
    "Is the fee one percent or two?",
    "Transfers take one to three working days",
]


@pytest.fixture(scope="module")
def guard() -> InputGuard:
    return InputGuard(semantic=False)


@pytest.mark.parametrize(("text", "kind"), SPELLED)
def test_spelled_values_are_personal_data(guard: InputGuard, text: str, kind: str) -> None:
    [value] = list(iter_personal(text))
    assert value.kind == kind
    found = guard.check(text)
    assert found is not None and found.reason is RefusalReason.PERSONAL_DATA
    assert found.rule == f"personal_data.{kind}"
    assert value.key not in found.detail  # masked


@pytest.mark.parametrize("text", PLAIN)
def test_ordinary_wording_is_no_value(text: str) -> None:
    assert list(iter_personal(text)) == []


def test_spelled_keys_match_typed_values() -> None:
    [email] = list(iter_personal("siti dot rahman at example dot com"))
    assert email.key == "siti.rahman@example.com"
    [phone] = list(iter_personal("zero one two three four five six seven eight nine"))
    assert phone.key == "0123456789"


@pytest.mark.parametrize(("text", "kind"), SPELLED)
def test_redact_mode_and_audit_log_mask_them(text: str, kind: str) -> None:
    assert f"[{kind}]" in InputGuard.redact(text)
    assert f"[{kind}]" in redact(text)


def test_audit_redaction_leaves_plain_text() -> None:
    for text in PLAIN:
        assert redact(text) == text


def test_output_guard_sees_spelled_values_absent_from_sources() -> None:
    guard = OutputGuard(via_guardrails=False)
    answer = "Write to siti dot rahman at example dot com for a refund."
    found = guard.check(answer, ["Refunds take 3 days."], [])
    assert found is not None and found.rule == "output.unsourced_email"
    assert guard.check(answer, ["Contact siti.rahman@example.com for refunds."], []) is None
