"""Numbers in claims and passages: amounts, percentages, periods, times, dates and frequencies,
parsed into comparable values."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: Relative tolerance when comparing parsed amounts (RM 5,000 == RM 5000.00).
VALUE_TOLERANCE = 1e-9

MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4,
    "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9,
    "sept": 9, "september": 9, "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12,
    "december": 12,
}  # fmt: skip

# --- numbers ---

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fourteen": 14, "fifteen": 15,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90,
}  # fmt: skip
#: Units of measure, often glued to the number ("100GB", "30kg", "5Mbps"): longest first.
_MEASURES = (
    "tb", "gbps", "gb", "mbps", "mb", "kbps", "kb", "kg", "km", "cm", "mm", "ml", "mg", "g", "m",
    "l",
)  # fmt: skip
_UNIT_WORDS = (
    r"%|percent|ringgit|sen|am|pm|(?:business|working|banking|calendar)[\s-](?:days?|hours?)|days?|hours?"
    r"|hrs?|h|minutes?|mins?|seconds?|secs?|weeks?|months?|years?|digits?|times|points?|pts|"
    + "|".join(_MEASURES)
)
#: A number word becomes a digit only before a unit ("two business days"), never alone ("no one").
_NUMBER_WORD_RE = re.compile(
    r"\b(" + "|".join(_NUMBER_WORDS) + r")(?=[\s-](?:" + _UNIT_WORDS + r")\b)"
)
_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))
_DATE_RE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH_ALT})"
    rf"|(?P<m2>{_MONTH_ALT})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?)\b(?![:\d])"
)
NUMBER_RE = re.compile(
    r"(?<![a-z0-9.,])(?:(?P<cur>rm|myr|usd|sgd|us\$|s\$|\$)\s?)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?::\d{2})?(?:\.\d+)?)(?:st|nd|rd|th)?"
    r"(?:\s?(?P<mult>k|mil|million|bil|billion|bn)\b)?"
    r"(?:[\s-]?(?P<unit>" + _UNIT_WORDS + r"))?(?![a-z0-9])"
    r"(?:\s+(?:a|an)\s+(?P<rate>day|week|month|year)\b)?"
)
#: Frequencies ("daily limit", "per month"): a claim's frequency must be the passage's.
FREQUENCY_RE = re.compile(
    r"\b(?:per|each|every)\s+(?P<unit>day|week|month|year|annum|transaction)\b"
    r"|\b(?P<adj>daily|weekly|monthly|yearly|annually|annual|hourly)\b"
)
_FREQUENCY_CANON = {
    "daily": "day", "weekly": "week", "monthly": "month", "yearly": "year", "annually": "year",
    "annual": "year", "annum": "year", "hourly": "hour",
}  # fmt: skip
_CURRENCY = {
    "rm": "MYR", "myr": "MYR", "usd": "USD", "us$": "USD", "$": "USD", "sgd": "SGD", "s$": "SGD",
}  # fmt: skip
_MULTIPLIER = {"k": 1e3, "mil": 1e6, "million": 1e6, "bil": 1e9, "billion": 1e9, "bn": 1e9}
_DURATION = {
    "day": "day", "hour": "hour", "hr": "hour", "h": "hour", "minute": "minute", "min": "minute",
    "second": "second", "sec": "second", "week": "week", "month": "month", "year": "year",
}  # fmt: skip
#: "working days" == "business days" == "banking days"; all differ from calendar "days".
_BUSINESS = ("business", "working", "banking")


# ------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Mention:
    """A parsed number: kind is money | percent | duration | time | date | count | measure (a unit
    of size, speed, weight, length or volume) | number (bare)."""

    kind: str
    value: float | str
    unit: str
    rate: str | None  # "day" in "RM 500 per day"
    surface: str
    start: int
    end: int

    def label(self) -> str:
        return re.sub(r"^(rm|myr|usd|sgd)", lambda m: m.group(1).upper(), self.surface.strip())


# ---------------------------------------------------------------------------------- numbers


def number_text(text: str) -> str:
    """Lowercased text where number words before a unit are digits, a.m./p.m. are am/pm."""
    text = text.lower().replace("’", "'").replace("–", "-").replace("—", "-")
    text = text.replace("\u00a0", " ").replace("a.m.", "am").replace("p.m.", "pm")
    text = text.replace("per cent", "percent")
    return _NUMBER_WORD_RE.sub(lambda m: str(_NUMBER_WORDS[m.group(1)]), text)


def _duration_unit(unit: str) -> str:
    words = unit.split()
    base = words[-1] if words[-1] in _DURATION else words[-1].removesuffix("s")
    prefix = "business " if words[0] in _BUSINESS else ""
    return prefix + _DURATION.get(base, base)


def _parse_value(raw: str, mult: str | None) -> float:
    value = float(raw.replace(",", ""))
    return value * _MULTIPLIER.get(mult or "", 1.0)


def _time_of_day(raw: str, unit: str | None) -> float:
    hours, _, minutes = raw.replace(".", ":").partition(":")
    h, m = int(hours), int(minutes or 0)
    if unit == "pm" and h < 12:
        h += 12
    if unit == "am" and h == 12:
        h = 0
    return float(h * 60 + m)


def extract_mentions(text: str) -> list[Mention]:
    """Every amount, percentage, period, time, date and bare number in `text`, normalised.

    "RM5,000", "RM 5000", "5,000 ringgit" and "MYR 5k" are all (money, 5000, MYR); "two business
    days" and "2 working days" are (duration, 2, business day); "50 sen" is (money, 0.5, MYR).
    """
    norm = number_text(text)
    mentions: list[Mention] = []
    for match in _DATE_RE.finditer(norm):
        day = match.group("d1") or match.group("d2")
        month = MONTHS[match.group("m1") or match.group("m2")]
        date = f"{month:02d}-{int(day):02d}"
        mentions.append(Mention("date", date, "", None, match.group(0), *match.span()))
        norm = norm[: match.start()] + " " * len(match.group(0)) + norm[match.end() :]
    for match in NUMBER_RE.finditer(norm):
        raw, cur, mult = match.group("num"), match.group("cur"), match.group("mult")
        unit = (match.group("unit") or "").replace("-", " ")
        kind, canon = "number", ""
        if ":" in raw or unit in ("am", "pm"):
            mentions.append(
                Mention("time", _time_of_day(raw, unit), "", None, match.group(0), *match.span())
            )
            continue
        value = _parse_value(raw, mult)
        if cur or unit in ("ringgit", "sen"):
            kind, canon = "money", _CURRENCY.get(cur or "rm", "MYR")
            if unit == "sen":
                value /= 100
            elif unit == "m":  # "RM5m": millions
                value *= 1e6
        elif unit in ("%", "percent"):
            kind = "percent"
        elif unit in ("digit", "digits", "times", "point", "points", "pts"):
            kind, canon = "count", unit.rstrip("s").replace("pt", "point")
        elif unit in _MEASURES:
            kind, canon = "measure", unit
        elif unit:
            kind, canon = "duration", _duration_unit(unit)
        mentions.append(
            Mention(kind, value, canon, match.group("rate"), match.group(0), *match.span())
        )
    _link_ranges(norm, mentions)
    return [_with_rate(norm, m) for m in mentions]


def _link_ranges(norm: str, mentions: list[Mention]) -> None:
    """In "1 to 3 business days" or "RM 10 - 500" both ends share the unit written once."""
    ordered = sorted(range(len(mentions)), key=lambda i: mentions[i].start)
    for i, j in itertools.pairwise(ordered):
        a, b = mentions[i], mentions[j]
        if not re.fullmatch(r"\s*(?:-|to|and|or|until)\s*", norm[a.end : b.start]):
            continue
        if a.kind == "number" and b.kind not in ("number", "date", "time"):
            mentions[i] = Mention(b.kind, a.value, b.unit, a.rate, a.surface, a.start, a.end)
        elif b.kind == "number" and a.kind in ("money", "percent"):
            mentions[j] = Mention(a.kind, b.value, a.unit, b.rate, b.surface, b.start, b.end)


def _with_rate(norm: str, m: Mention) -> Mention:
    """Attach the frequency written in the same clause ("RM 500 per day", "daily limit of RM 500")."""
    if m.rate or m.kind in ("duration", "time", "date"):
        return m
    for a, b in clause_spans(norm):
        if a <= m.start < b:
            freqs = [(abs(f.start() - m.start), f) for f in FREQUENCY_RE.finditer(norm, a, b)]
            if freqs:
                f = min(freqs, key=lambda x: x[0])[1]
                unit = f.group("unit") or _FREQUENCY_CANON[f.group("adj")]
                rate = _FREQUENCY_CANON.get(unit, unit)
                return Mention(m.kind, m.value, m.unit, rate, m.surface, m.start, m.end)
    return m


def frequencies(text: str) -> set[str]:
    """Canonical frequencies mentioned anywhere: {"day", "month", "transaction", ...}."""
    out = set()
    for f in FREQUENCY_RE.finditer(number_text(text)):
        unit = f.group("unit") or _FREQUENCY_CANON[f.group("adj")]
        out.add(_FREQUENCY_CANON.get(unit, unit))
    for m in re.finditer(r"\b(?:a|an)\s+(day|week|month|year)\b", number_text(text)):
        out.add(m.group(1))
    return out


def _same_value(a: float | str, b: float | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(a - b) <= VALUE_TOLERANCE * max(1.0, abs(a), abs(b))


def same_fact(claim: Mention, source: Mention) -> bool:
    """Same value; same kind and unit unless the claim's number is bare; no clashing frequency."""
    if not _same_value(claim.value, source.value):
        return False
    if claim.kind == "number":
        return source.kind not in ("date", "time")
    if (claim.kind, claim.unit) != (source.kind, source.unit):
        return False
    return not (claim.rate and source.rate and claim.rate != source.rate)


#: What joins the two sides of a rate: "100 points = RM1", "USD 1 equals RM4.50", "RM1 for
#: every 100 points".
_RATE_LINK_RE = re.compile(
    r"^\s*(?:=|equals?|(?:is|are) (?:worth|equal to)|for (?:every|each))\s*$", re.IGNORECASE
)


def rates(text: str) -> list[tuple[Mention, Mention]]:
    """Pairs of quantities of different kinds that `text` states as equal, both ways round."""
    norm = number_text(text)
    pairs: list[tuple[Mention, Mention]] = []
    for a, b in itertools.pairwise(extract_mentions(text)):
        if (a.kind, a.unit) != (b.kind, b.unit) and _RATE_LINK_RE.match(norm[a.end : b.start]):
            pairs += [(a, b), (b, a)]
    return pairs


def conversion(
    mention: Mention, claim: Sequence[Mention], stated: Sequence[tuple[Mention, Mention]]
) -> Mention | None:
    """The claim's other quantity that `mention` follows from at a rate the source states
    ("500 points" for "RM5" in "500 points are worth RM5" against "100 points = RM1")."""
    for have, give in stated:
        if (give.kind, give.unit) != (mention.kind, mention.unit):
            continue
        for other in claim:
            values = (other.value, have.value, give.value, mention.value)
            if (
                other is not mention
                and (other.kind, other.unit) == (have.kind, have.unit)
                and all(isinstance(v, float) for v in values)
                and have.value
                and math.isclose(
                    float(other.value) / float(have.value) * float(give.value),
                    float(mention.value),
                    rel_tol=1e-9,
                )
            ):
                return other
    return None


#: Clause boundaries inside a sentence (used to bind a number to what it is about).
_CLAUSE_RE = re.compile(r",(?!\d)|[;:()]|\s(?:and|but|or|while|whereas|whilst)\s")


def clause_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the clauses of `text` (split on punctuation and conjunctions)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _CLAUSE_RE.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]
