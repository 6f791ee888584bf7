"""Sensitive values written into a text: payment data (cards, CVV, IBAN, bank accounts),
personal identifiers (e-mail, phone, Malaysian NRIC, passport; e-mails and phones also when
spelled out in words, `spelled.py`) and machine secrets.

A value counts only when it validates (Luhn for cards, mod-97 for IBAN, a real date and
place-of-birth code for NRIC), so order numbers and amounts do not trip it. Every `detail`
names the kind and a masked tail, never the value itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.shared.spelled import spelled_emails, spelled_phones

# Runs of digit groups split by single spaces or dashes; card numbers are looked for among
# their contiguous sub-runs, so "4111 1111 1111 1111 12/25" still yields the card.
DIGIT_RUN = re.compile(r"(?<![\d.,])\d+(?:[ \-]\d+)*")
_GROUP_SPLIT = re.compile(r"[ \-]")
CVV = re.compile(
    r"\b(?:cvv2?|cvc2?|cvn|cid|csc|card (?:security|verification) (?:code|value)|"
    r"kod keselamatan(?: kad)?)\b[^\d\n]{0,20}?(?<!\d)(\d{3,4})(?!\d)",
    re.IGNORECASE,
)
IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
BANK_ACCOUNT = re.compile(
    r"\b(?:(?:bank )?(?:account|acct|a/c) (?:number|no\.?|num|#)|(?:nombor|no\.?) akaun(?: bank)?)"
    r"\s*(?:is|:|=|-|ialah|adalah)?\s*(?<!\d)(\d(?:[ \-]?\d){7,16})(?!\d)",
    re.IGNORECASE,
)
EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# Malaysian mobiles (01x) and landlines (03-, 04- ...), with or without +60 / 60.
PHONE_MY = re.compile(
    r"(?<![\w+])(?:\+?6\s?0|0)[\s-]?(?:1\d[\s-]?\d{3,4}|[3-9][\s-]?\d{3,4}|\(\d{1,2}\)\s?\d{3,4})"
    r"[\s-]?\d{4}(?!\d)"
)
# Any other number written in international form: "+44 20 7946 0958", "+1 (415) 555-0100".
PHONE_INTL = re.compile(
    r"(?<![\w+])\+\d{1,3}[\s-]?(?:\(\d{1,4}\)[\s-]?)?\d{1,5}(?:[\s-]?\d{2,5}){1,4}(?!\d)"
)
NRIC_DASHED = re.compile(r"(?<![\d-])(\d{2})(\d{2})(\d{2})[-\s](\d{2})[-\s](\d{4})(?![\d-])")
NRIC_PLAIN = re.compile(r"(?<!\d)(\d{2})(\d{2})(\d{2})(\d{2})(\d{4})(?!\d)")
NRIC_CONTEXT = re.compile(
    r"\b(?:n?ric|i/?c|mykad|mykid|kad pengenalan|no\.? ?kp|identity card|identification)\b",
    re.IGNORECASE,
)
PASSPORT_CONTEXT = re.compile(r"\b(?:passport|pasport)\b", re.IGNORECASE)
PASSPORT_ID = re.compile(r"\b[A-Z]{1,2}\d{6,9}\b", re.IGNORECASE)
SECRET = re.compile(
    r"\b(?:sk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}|"
    r"gh[pousr]_[A-Za-z0-9]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})\b"
    r"|-----BEGIN (?:RSA |EC |OPENSSH |DSA |PGP )?PRIVATE KEY-----"
    r"|\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|client[_-]?secret)\s*[:=]\s*['\"]?[A-Za-z0-9_\-/+]{12,}",
    re.IGNORECASE,
)

# Place-of-birth codes that exist on a MyKad (JPN): states 01-16, countries 21-59, 60-68,
# 71-72, 74-79, 82-93, 98-99.
_NRIC_PLACE_CODES = frozenset(
    [*range(1, 17), *range(21, 69), 71, 72, *range(74, 80), *range(82, 94), 98, 99]
)
_DIGITS = re.compile(r"\D")


@dataclass(frozen=True)
class Value:
    """One sensitive value found in a text; `key` is its canonical form for comparisons."""

    kind: str  # card, cvv, iban, bank_account, email, phone, nric, passport, secret
    key: str
    masked: str
    span: tuple[int, int] = field(default=(0, 0), compare=False)  # where, in the text given


def digits(text: str) -> str:
    return _DIGITS.sub("", text)


def luhn_valid(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    iban = iban.replace(" ", "").upper()
    if not 15 <= len(iban) <= 34:
        return False
    moved = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def mask_tail(value: str, keep: int = 4) -> str:
    """'4111111111111111' -> '************1111' (only the tail survives)."""
    keep = min(keep, max(len(value) - 4, 0))
    return "*" * (len(value) - keep) + (value[-keep:] if keep else "")


def mask_email(email: str) -> str:
    local, _, domain = email.partition("@")
    tld = domain.rsplit(".", 1)[-1]
    return f"{local[:1]}***@***.{tld}"


def _nric_plausible(yy: str, mm: str, dd: str, pb: str) -> bool:
    del yy  # any two-digit year is possible
    return 1 <= int(mm) <= 12 and 1 <= int(dd) <= 31 and int(pb) in _NRIC_PLACE_CODES


def _card_in_run(run: str) -> str | None:
    groups = _GROUP_SPLIT.split(run)
    if sum(map(len, groups)) < 13:
        return None
    for start in range(len(groups)):
        number = ""
        for group in groups[start:]:
            number += group
            if len(number) > 19:
                break
            # Issuer ranges start with 2-6 (Mastercard 2/5, Amex/JCB 3, Visa 4, UnionPay 6):
            # long order and reference numbers mostly do not.
            if (
                len(number) >= 13
                and number[0] in "23456"
                and len(set(number)) > 1
                and luhn_valid(number)
            ):
                return number
    return None


def iter_payment(text: str) -> Iterator[Value]:
    for m in DIGIT_RUN.finditer(text):
        number = _card_in_run(m.group(0))
        if number:
            yield Value("card", number, mask_tail(number), m.span())
    for m in CVV.finditer(text):
        yield Value("cvv", m.group(1), "*" * len(m.group(1)), m.span(1))
    for m in IBAN.finditer(text):
        if iban_valid(m.group(0)):
            key = m.group(0).replace(" ", "").upper()
            yield Value("iban", key, key[:2] + mask_tail(key[2:]), m.span())
    for m in BANK_ACCOUNT.finditer(text):
        number = digits(m.group(1))
        yield Value("bank_account", number, mask_tail(number), m.span(1))


def iter_personal(text: str) -> Iterator[Value]:
    for m in EMAIL.finditer(text):
        yield Value("email", m.group(0).lower(), mask_email(m.group(0)), m.span())
    for address, span in spelled_emails(text):
        yield Value("email", address, mask_email(address), span)
    seen_phone: set[str] = set()
    for pattern in (PHONE_MY, PHONE_INTL):
        for m in pattern.finditer(text):
            number = digits(m.group(0))
            if 8 <= len(number) <= 15 and number not in seen_phone:
                seen_phone.add(number)
                yield Value("phone", number, mask_tail(number, 2), m.span())
    for number, span in spelled_phones(text):
        if number not in seen_phone:
            seen_phone.add(number)
            yield Value("phone", number, mask_tail(number, 2), span)
    for m in NRIC_DASHED.finditer(text):
        if _nric_plausible(*m.groups()[:4]):
            number = "".join(m.groups())
            yield Value("nric", number, mask_tail(number, 2), m.span())
    if NRIC_CONTEXT.search(text):
        for m in NRIC_PLAIN.finditer(text):
            if _nric_plausible(*m.groups()[:4]):
                number = "".join(m.groups())
                yield Value("nric", number, mask_tail(number, 2), m.span())
    if PASSPORT_CONTEXT.search(text):
        for m in PASSPORT_ID.finditer(text):
            key = m.group(0).upper()
            yield Value("passport", key, key[:1] + mask_tail(key[1:], 2), m.span())


def iter_secrets(text: str) -> Iterator[Value]:
    for m in SECRET.finditer(text):
        yield Value("secret", m.group(0), f"{m.group(0)[:3]}***", m.span())


def iter_values(text: str) -> Iterator[Value]:
    """Every sensitive value in `text` (payment, personal, secrets)."""
    yield from iter_payment(text)
    yield from iter_personal(text)
    yield from iter_secrets(text)


def mask_values(text: str) -> tuple[str, list[str]]:
    """`text` with every validated value replaced by `[kind]` (overlaps merged, the first
    kind found names the span), and the kinds replaced. Unlike the audit log's redaction,
    only what the guards would refuse is masked: order and transaction ids stay readable,
    because the pipeline still has to answer the question."""
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in sorted({(*v.span, v.kind) for v in iter_values(text)}):
        if merged and start < merged[-1][1]:
            first, last, first_kind = merged[-1]
            merged[-1] = (first, max(last, end), first_kind)
        else:
            merged.append((start, end, kind))
    for start, end, kind in reversed(merged):
        text = f"{text[:start]}[{kind}]{text[end:]}"
    return text, [kind for _, _, kind in merged]


def first_value(norm: Normalized, find: Callable[[str], Iterator[Value]]) -> Value | None:
    """The first value `find` yields in the question's data views (original, then folded)."""
    for view in norm.data_views():
        for value in find(view):
            return value
    return None
