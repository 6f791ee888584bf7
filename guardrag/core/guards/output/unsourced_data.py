"""Sensitive values and links in an answer must come from its sources.

UNSAFE_OUTPUT when the answer carries a card number, IBAN, bank account, e-mail, phone, NRIC,
passport number or machine secret that no source contains, or links to a URL or domain that
no source contains.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.sensitive_data import Value, digits, iter_values
from guardrag.core.guards.unit import Call, output_rule

URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+|\bwww\.[^\s<>\"'`)\]]+", re.IGNORECASE)
BARE_DOMAIN = re.compile(
    r"(?<![@\w.-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|net|org|io|co|gov|edu|info|biz|"
    r"app|xyz|link|ly|me|my|sg|site|online|top|click|shop)(?:\.[a-z]{2})?(?![\w-])(?:/[^\s<>\"')\]]*)?",
    re.IGNORECASE,
)
_TRAILING = ".,;:!?*_"


def _url_key(url: str) -> str:
    url = url.strip().rstrip(_TRAILING).lower()
    url = re.sub(r"^https?://", "", url)
    url = re.sub(r"^www\.", "", url)
    return url.rstrip("/")


def _value_key(value: Value) -> str:
    if value.kind == "phone" and value.key.startswith("60") and len(value.key) >= 10:
        return "0" + value.key[2:]  # +60 12-... and 012-... are the same number
    return value.key


@lru_cache(maxsize=64)
def _source_index(sources: tuple[str, ...]) -> tuple[frozenset[str], str, str]:
    """Keys of sensitive values, the digit stream and the lower-cased text of the sources."""
    keys = frozenset(_value_key(v) for text in sources for v in iter_values(text))
    digit_stream = " ".join(digits(text) for text in sources)
    lowered = " ".join(text.lower() for text in sources)
    return keys, digit_stream, lowered


def check_unsourced_values(answer: str, sources: Sequence[str]) -> GuardFinding | None:
    keys, digit_stream, _ = _source_index(tuple(sources))
    for value in iter_values(answer):
        key = _value_key(value)
        if key in keys:
            continue
        if value.kind not in {"email", "secret", "passport", "iban"} and key in digit_stream:
            continue  # same number, formatted differently in the source
        return finding(
            RefusalReason.UNSAFE_OUTPUT,
            f"output.unsourced_{value.kind}",
            f"{value.kind} {value.masked} in the answer is in no source",
        )
    return None


def check_unsourced_urls(answer: str, sources: Sequence[str]) -> GuardFinding | None:
    _, _, lowered = _source_index(tuple(sources))
    source_keys = {_url_key(u) for u in URL.findall(lowered)}
    for match in URL.finditer(answer):
        key = _url_key(match.group(0))
        if key in source_keys or any(k.startswith(key + "/") for k in source_keys):
            continue
        return finding(
            RefusalReason.UNSAFE_OUTPUT,
            "output.unsourced_url",
            f"link {key[:80]!r} in the answer is in no source",
        )
    answer_wo_urls = URL.sub(" ", answer)
    for match in BARE_DOMAIN.finditer(answer_wo_urls):
        host = _url_key(match.group(0)).split("/", 1)[0]
        if host in lowered:
            continue
        return finding(
            RefusalReason.UNSAFE_OUTPUT,
            "output.unsourced_domain",
            f"domain {host[:80]!r} in the answer is in no source",
        )
    return None


def check_unsourced_data(call: Call) -> GuardFinding | None:
    """A value, then a link, in the answer that no source contains."""
    return check_unsourced_values(call.text, call.sources) or check_unsourced_urls(
        call.text, call.sources
    )


GUARD = output_rule(
    "output_unsourced_data",
    "OutputUnsourcedData",
    check_unsourced_data,
    doc="Sensitive values and links in the answer must come from the sources.",
)
