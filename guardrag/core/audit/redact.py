"""Redaction of sensitive values before anything reaches the audit store, spool or logs.

The detectors are the input guard's own (`guardrag.core.guards.shared.sensitive_data`, the volunteered
secret rule of `guardrag.core.guards.input.credentials`): one definition of "a card number" for both
refusing a question and keeping it out of the log. Redaction is deliberately stricter than
refusal: a false positive only makes one log line less readable, so values are replaced
whether or not they validate (Luhn, NRIC dates), and any long digit run goes too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from guardrag.core.guards.input.shared_secret import VOLUNTEERED
from guardrag.core.guards.shared.normalize import normalize
from guardrag.core.guards.shared.sensitive_data import (
    BANK_ACCOUNT,
    CVV,
    DIGIT_RUN,
    EMAIL,
    IBAN,
    NRIC_DASHED,
    NRIC_PLAIN,
    PASSPORT_CONTEXT,
    PASSPORT_ID,
    PHONE_INTL,
    PHONE_MY,
    SECRET,
    digits,
    iter_payment,
    iter_values,
)
from guardrag.core.guards.shared.spelled import SPELLED_CUE, spelled_emails, spelled_phones

#: Digit runs this long are replaced even when no detector claims them: account, order or
#: reference numbers identify a customer as surely as a phone number does.
LONG_NUMBER_DIGITS = 8

# (kind, pattern, group): the group holding the value; 0 is the whole match. Order is
# priority when spans overlap (the first kind to claim a character names the placeholder).
_PATTERNS: tuple[tuple[str, re.Pattern[str], int | str], ...] = (
    ("secret", SECRET, 0),
    ("email", EMAIL, 0),
    ("iban", IBAN, 0),
    ("cvv", CVV, 1),
    ("bank_account", BANK_ACCOUNT, 1),
    ("nric", NRIC_DASHED, 0),
    ("nric", NRIC_PLAIN, 0),
    ("phone", PHONE_MY, 0),
    ("phone", PHONE_INTL, 0),
)
_CREDENTIAL_GROUPS = ("value", "token")
_FULLY_REDACTED = "[redacted: obfuscated sensitive data]"

Span = tuple[int, int, str]


def _spans(text: str) -> Iterator[Span]:
    """Detected values, most specific first (the catch-all for long numbers comes last)."""
    long_numbers: list[Span] = []
    for match in DIGIT_RUN.finditer(text):
        run = match.group(0)
        if any(v.kind == "card" for v in iter_payment(run)):
            yield match.start(), match.end(), "card"
        elif len(digits(run)) >= LONG_NUMBER_DIGITS:
            long_numbers.append((match.start(), match.end(), "number"))
    for kind, pattern, group in _PATTERNS:
        for match in pattern.finditer(text):
            if match.group(group):
                yield match.start(group), match.end(group), kind
    for match in VOLUNTEERED.finditer(text):
        group = next(g for g in _CREDENTIAL_GROUPS if match.group(g))
        yield match.start(group), match.end(group), "credential"
    if PASSPORT_CONTEXT.search(text):
        for match in PASSPORT_ID.finditer(text):
            yield match.start(), match.end(), "passport"
    yield from ((*span, "email") for _, span in spelled_emails(text))
    yield from ((*span, "phone") for _, span in spelled_phones(text))
    yield from long_numbers


def _plain(text: str) -> bool:
    """Cheap pre-check: ASCII with no digit, '@', secret pattern or spelled-out number or
    address word holds nothing to redact (most trail strings), so the full pass is skipped."""
    return (
        text.isascii()
        and "@" not in text
        and not any(ch.isdigit() for ch in text)
        and SECRET.search(text) is None
        and SPELLED_CUE.search(text) is None
    )


def _replace(text: str, found: Counter[str]) -> str:
    """Replace every detected span by `[kind]`; overlapping spans merge into the first kind."""
    merged: list[list[Any]] = []
    # Stable sort: at equal spans the more specific kind, yielded first, names the value.
    for start, end, kind in sorted(_spans(text), key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    for start, end, kind in reversed(merged):
        text = f"{text[:start]}[{kind}]{text[end:]}"
        found[kind] += 1
    return text


def _still_sensitive(text: str) -> bool:
    """Whether the guards would still find a value, in any view they read (NFKC-folded,
    invisible characters stripped, decoded base64 payloads)."""
    norm = normalize(text)
    if any(next(iter_values(view), None) for view in norm.data_views()):
        return True
    return any(VOLUNTEERED.search(view) for _, view in norm.word_views())


def redact(text: str, found: Counter[str] | None = None) -> str:
    """`text` with card numbers, e-mails, phones, NRIC, passport, IBAN, bank accounts, CVV,
    OTP/PIN values and secrets replaced by `[kind]`; kinds are counted into `found`."""
    if _plain(text):
        return text
    found = Counter() if found is None else found
    redacted = _replace(text, found)
    if not _still_sensitive(redacted):
        return redacted
    # Obfuscated ("4111\u200b1111...", full-width digits): redact what the guards read.
    redacted = _replace(normalize(text).text, found)
    if not _still_sensitive(redacted):
        return redacted
    # Only left in an encoded payload: keep nothing rather than guess which token it is.
    found["encoded"] += 1
    return _FULLY_REDACTED


def redact_data(value: Any, found: Counter[str] | None = None) -> Any:
    """`value` (JSON-like: dicts, lists, scalars) with every string redacted; keys are kept."""
    found = Counter() if found is None else found
    if isinstance(value, str):
        return redact(value, found)
    if isinstance(value, dict):
        return {key: redact_data(item, found) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(item, found) for item in value]
    return value
