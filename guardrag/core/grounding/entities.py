"""Named entities (products, brands, acronyms) in a text, for the check that a claim names
nothing its passage does not."""

from __future__ import annotations

import re

from guardrag.core.grounding.numbers import MONTHS
from guardrag.core.text import stem, wordset

# --- entities ---

_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'’&][A-Za-z0-9]+)*\+?")
#: "RM5000" is an amount (checked as a number), not a name.
_AMOUNT_TOKEN_RE = re.compile(r"(?:RM|MYR|USD|SGD)\d[\dA-Za-z]*", re.IGNORECASE)
#: Capitalised words that are not names even mid-sentence.
ENTITY_STOPWORDS = wordset("i rm myr usd sgd am pm ok yes no please note step steps faq id")

# --------------------------------------------------------------------------------- entities


def entity_key(token: str) -> str:
    key = token.lower().replace("’", "'").removesuffix("'s")
    key = re.sub(r"[-'&+]", "", key)
    return str(MONTHS.get(key, key))


def extract_entities(text: str) -> list[str]:
    """Capitalised names, products and acronyms, skipping sentence-initial words and a stoplist.

    A sentence-initial word counts only if it is an acronym or has inner capitals (DuitNow, eKYC):
    otherwise "Transfers settle..." would demand the word "Transfers" verbatim.
    """
    out: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        token = match.group(0)
        before = text[: match.start()].rstrip()
        initial = not before or before[-1] in ".:!?\"“'‘(-•*"
        inner_caps = any(ch.isupper() for ch in token[1:]) and len(token) > 1
        capitalised = token[0].isupper()
        if token.lower() in ENTITY_STOPWORDS or _AMOUNT_TOKEN_RE.fullmatch(token):
            continue
        if inner_caps or (capitalised and not initial):
            out.append(token)
    return out


def entity_index(text: str) -> set[str]:
    keys: set[str] = set()
    for match in _TOKEN_RE.finditer(text):
        key = entity_key(match.group(0))
        keys.update({key, stem(key)})
        keys.update(stem(p) for p in re.split(r"[-'’&]", match.group(0).lower()) if p)
    return keys
