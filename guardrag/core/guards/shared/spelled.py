"""E-mail addresses and phone numbers written out in words, the way people dodge a filter or
read a number aloud: "siti dot rahman at example dot com", "siti [at] example [dot] com",
"zero one two, three four five, six seven eight nine", "kosong satu dua ...".

`sensitive_data.iter_personal` reports these like typed values (same kinds, keys and masks),
so the input guard, the output guard and the audit log's redaction all see them.

An e-mail needs a spelled or bracketed "at" and some sign that it is an address (a spelled or
bracketed dot in the domain, or a bracketed "at", or a dotted/underscored/numbered local
part), so "I paid at lazada.com" and "meet me at home" are not addresses. A phone needs a run
of at least three spelled digits that adds up to a plausible number (Malaysian 01x / 0x
landline, or +60), so "one or two questions" is not a number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_F = re.IGNORECASE

_OPEN, _CLOSE = r"[\[({<]", r"[\])}>]"
_AT_SPELLED = r"\s+(?:at|@)\s+"
_AT_BRACKETED = rf"\s*{_OPEN}\s*(?:at|@)\s*{_CLOSE}\s*"
_DOT_SPELLED = rf"\s+(?:dot|titik)\s+|\s*{_OPEN}\s*(?:dot|titik|\.)\s*{_CLOSE}\s*"
_DOT = rf"(?:{_DOT_SPELLED}|\.)"
_LABEL = r"[a-z0-9](?:[a-z0-9_-]{0,62})"
_TLD = (
    r"(?:com|net|org|edu|gov|mil|info|biz|io|co|app|dev|online|site|xyz|me|example|test|"
    r"[a-z]{2})"
)
SPELLED_EMAIL = re.compile(
    rf"(?<![\w.@-])(?P<local>{_LABEL}(?:(?:{_DOT}|\s+(?:underscore|dash|hyphen)\s+){_LABEL})*)"
    rf"(?P<at>{_AT_BRACKETED}|{_AT_SPELLED})"
    rf"(?P<domain>{_LABEL}(?:{_DOT}{_LABEL})*?{_DOT}{_TLD})(?![\w-])",
    _F,
)
# Words that sit before "at" in ordinary prose ("look at", "paid it at"): never a local part.
_NOT_LOCAL = frozenset({
    "a", "an", "the", "it", "me", "you", "him", "her", "us", "them", "this", "that", "these",
    "those", "what", "who", "where", "look", "looking", "looked", "arrive", "arrived",
    "arriving", "available", "be", "been", "is", "are", "was", "were", "am", "paid", "pay",
    "bought", "buy", "buying", "shop", "shopping", "sold", "sell", "top", "topped", "up",
    "reload", "reloaded", "here", "there", "now", "only", "just", "home", "work", "office",
    "branch", "store", "counter", "i", "we", "they", "she", "he", "one", "all",
})  # fmt: skip
_SPELLED_DOT = re.compile(_DOT_SPELLED, _F)
_BRACKETED_AT = re.compile(_AT_BRACKETED, _F)
_NAMELIKE_LOCAL = re.compile(r"[._\d]|\s(?:underscore|dash|hyphen)\s|\s(?:dot|titik)\s", _F)
_JOINERS = re.compile(
    rf"{_DOT_SPELLED}|\s+(?:underscore)\s+|\s+(?:dash|hyphen)\s+|{_AT_BRACKETED}|{_AT_SPELLED}",
    _F,
)

_DIGIT_WORDS = {
    "zero": "0", "oh": "0", "o": "0", "nought": "0", "kosong": "0", "one": "1", "satu": "1",
    "two": "2", "dua": "2", "three": "3", "tiga": "3", "four": "4", "empat": "4",
    "five": "5", "lima": "5", "six": "6", "enam": "6", "seven": "7", "tujuh": "7",
    "eight": "8", "lapan": "8", "nine": "9", "sembilan": "9",
}  # fmt: skip
_REPEAT_WORDS = {"double": 2, "triple": 3}
_TOKEN = (
    r"(?:zero|one|oh|o|nought|kosong|satu|two|dua|three|tiga|four|empat|five|lima|six|enam|"
    r"seven|tujuh|eight|lapan|nine|sembilan|double|triple|plus|\+?\d{1,4})"
)
SPELLED_NUMBER = re.compile(
    rf"(?<![\w+])(?:{_TOKEN}(?:\s*[,.-]\s*|\s+(?:dash\s+)?)){{6,}}{_TOKEN}(?![\w])", _F
)
_PIECE = re.compile(rf"(?<![\w+]){_TOKEN}(?!\w)", _F)
_PHONE = re.compile(r"^(?:\+?60|0)(?:1\d{8,9}|[3-9]\d{7,8})$")
_MIN_SPELLED = 3

#: Cheap test for "could anything here be spelled out" (the audit log skips plain text).
SPELLED_CUE = re.compile(
    r"\b(?:dot|titik|at|zero|oh|one|two|three|four|five|six|seven|eight|nine|kosong|satu|dua|"
    r"tiga|empat|lima|enam|tujuh|lapan|sembilan)\b|[\[({<]\s*(?:at|@)\s*[\])}>]",
    _F,
)


def _email_key(match: re.Match[str]) -> str:
    def join(part: str) -> str:
        def sub(m: re.Match[str]) -> str:
            word = m.group(0).strip(" []()<>{}").lower()
            return {"underscore": "_", "dash": "-", "hyphen": "-", "at": "@", "@": "@"}.get(
                word, "."
            )

        return _JOINERS.sub(sub, part)

    return f"{join(match.group('local'))}@{join(match.group('domain'))}".lower()


def spelled_emails(text: str) -> Iterator[tuple[str, tuple[int, int]]]:
    """(address as typed form, span) for each e-mail written out in words."""
    for match in SPELLED_EMAIL.finditer(text):
        local = match.group("local")
        if local.lower() in _NOT_LOCAL:
            continue
        bracketed = bool(_BRACKETED_AT.fullmatch(match.group("at")))
        spelled_dot = bool(_SPELLED_DOT.search(match.group("domain")))
        if not (bracketed or spelled_dot or _NAMELIKE_LOCAL.search(local)):
            continue  # "paid at lazada.com": a shop, not an address
        yield _email_key(match), match.span()


def _number_digits(run: str) -> tuple[str, int]:
    """The digits a spelled run stands for, and how many of them were words."""
    out: list[str] = []
    spelled = 0
    repeat = 1
    for piece in _PIECE.findall(run):
        word = piece.lower()
        if word in _REPEAT_WORDS:
            repeat = _REPEAT_WORDS[word]
            continue
        if word == "plus":
            out.append("+")
            continue
        digit = _DIGIT_WORDS.get(word)
        if digit is None:
            out.append(word * repeat if repeat > 1 and len(word) == 1 else word)
        else:
            spelled += 1
            out.append(digit * repeat)
        repeat = 1
    return "".join(out), spelled


def spelled_phones(text: str) -> Iterator[tuple[str, tuple[int, int]]]:
    """(digits, span) for each phone number written (partly) in words."""
    for match in SPELLED_NUMBER.finditer(text):
        number, spelled = _number_digits(match.group(0))
        if spelled >= _MIN_SPELLED and _PHONE.match(number):
            yield number.lstrip("+"), match.span()
