"""Output checks: what a generated answer may not contain.

UNSAFE_OUTPUT when the answer (1) carries chat-template tokens, (2) carries a card number,
IBAN, bank account, e-mail, phone, NRIC, passport number or machine secret that no source
contains, (3) links to a URL or domain that no source contains, (4) repeats a run of
`LEAK_NGRAM` words from a confidential prompt that no source contains (quoted passages in
the prompt are exempt: they are sanctioned replies the model is told to use verbatim), or
(5) is profane.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.input.injection import CHAT_TEMPLATE
from guardrag.core.guards.input.profanity import find_profanity, mask_word
from guardrag.core.guards.shared.sensitive_data import Value, digits, iter_values

#: Shared word run (with a prompt) long enough to count as leaking it.
LEAK_NGRAM = 10

URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+|\bwww\.[^\s<>\"'`)\]]+", re.IGNORECASE)
BARE_DOMAIN = re.compile(
    r"(?<![@\w.-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|net|org|io|co|gov|edu|info|biz|"
    r"app|xyz|link|ly|me|my|sg|site|online|top|click|shop)(?:\.[a-z]{2})?(?![\w-])(?:/[^\s<>\"')\]]*)?",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|'[^'\n]{12,}'")
_WORD = re.compile(r"\w+")
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


def _shingles(text: str, n: int) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@lru_cache(maxsize=32)
def _prompt_shingles(prompt: str, n: int) -> frozenset[tuple[str, ...]]:
    return frozenset(_shingles(_QUOTED.sub(" ", prompt), n))


def check_template_tokens(answer: str) -> GuardFinding | None:
    match = CHAT_TEMPLATE.search(answer.lower())
    if match:
        return finding(
            RefusalReason.UNSAFE_OUTPUT,
            "output.template_tokens",
            f"chat-template marker {match.group(0)[:20]!r} in the answer",
        )
    return None


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


def check_prompt_leak(
    answer: str, sources: Sequence[str], prompts: Sequence[str], n: int = LEAK_NGRAM
) -> GuardFinding | None:
    if not prompts:
        return None
    answer_shingles = _shingles(answer, n)
    if not answer_shingles:
        return None
    source_shingles: set[tuple[str, ...]] = set()
    for text in sources:
        source_shingles |= _shingles(text, n)
    for index, prompt in enumerate(prompts):
        prompt_shingles = _prompt_shingles(prompt, n)
        shared = (answer_shingles & prompt_shingles) - source_shingles
        if shared:
            share = len(shared) / max(len(prompt_shingles), 1)
            return finding(
                RefusalReason.UNSAFE_OUTPUT,
                "output.prompt_leak",
                f"{len(shared)} {n}-word run(s) from prompt #{index} in the answer "
                f"({share:.0%} of that prompt)",
                score=min(1.0, 0.5 + share),
            )
    return None


def check_profanity(answer: str) -> GuardFinding | None:
    match = find_profanity(answer.lower())
    if match:
        return finding(
            RefusalReason.UNSAFE_OUTPUT,
            "output.profanity",
            f"profane word {mask_word(match.group(0))!r} in the answer",
        )
    return None
