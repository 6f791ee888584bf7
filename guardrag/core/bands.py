"""Numeric bands: the range a table row's label gives ("60 to 69", "Below 40", "75 and over")
and whether a number the question gives falls in it.

A table keyed by bands (ages, amounts, durations) shares no word with the question that picks
one of its rows: "a 65-year-old" is the row "60 to 69", "under 40" the row "Below 40". Words
cannot tell such rows apart; the band can.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = r"(\d+(?:\.\d+)?)"
_BELOW = r"(?:below|under|less\s+than|younger\s+than|fewer\s+than|<)"
_ABOVE = r"(?:above|over|more\s+than|older\s+than|greater\s+than|>)"
_LEAD = r"^\s*(?:(?:aged?|ages)\s+)?"
#: A row label's band, tried in order at the start of the label.
_LABEL_BETWEEN = re.compile(_LEAD + _NUMBER + r"\s*(?:to|-|–|—)\s*" + _NUMBER + r"\b", re.I)
_LABEL_BELOW = re.compile(_LEAD + _BELOW + r"\s*" + _NUMBER + r"\b", re.I)
_LABEL_ABOVE = re.compile(_LEAD + _ABOVE + r"\s*" + _NUMBER + r"\b", re.I)
_LABEL_FROM = re.compile(
    _LEAD + _NUMBER + r"\s*(?:\+|(?:and|or)\s+(?:over|above|older|more|upwards)\b)", re.I
)
_LABEL_UP_TO = re.compile(_LEAD + _NUMBER + r"\s*(?:and|or)\s+(?:under|below|younger|less)\b", re.I)
#: A bound the question states ("under 40", "over 79").
_QUESTION_BELOW = re.compile(r"\b" + _BELOW + r"\s+" + _NUMBER + r"\b", re.I)
_QUESTION_ABOVE = re.compile(r"\b" + _ABOVE + r"\s+" + _NUMBER + r"\b", re.I)
_QUESTION_NUMBER = re.compile(r"(?<![\d.])" + _NUMBER + r"(?![\d.]|\s*%)")


@dataclass(frozen=True)
class Band:
    """Numbers from `low` to `high` (None: unbounded), each end included or not."""

    low: float | None
    high: float | None
    low_in: bool = True
    high_in: bool = True

    def holds(self, number: float) -> bool:
        above_low = self.low is None or number > self.low or (self.low_in and number == self.low)
        below_high = (
            self.high is None or number < self.high or (self.high_in and number == self.high)
        )
        return above_low and below_high


def label_band(label: str) -> Band | None:
    """The band a table row's label (its first cell) starts with, or None."""
    if found := _LABEL_BETWEEN.match(label):
        return Band(float(found[1]), float(found[2]))
    if found := _LABEL_BELOW.match(label):
        return Band(None, float(found[1]), high_in=False)
    if found := _LABEL_ABOVE.match(label):
        return Band(float(found[1]), None, low_in=False)
    if found := _LABEL_FROM.match(label):
        return Band(float(found[1]), None)
    if found := _LABEL_UP_TO.match(label):
        return Band(None, float(found[1]))
    return None


def question_bands(question: str) -> list[Band]:
    """The bounds ("under 40") and single numbers ("a 65-year-old") the question gives, as
    bands; a percentage is a value, not a key, and is left out."""
    bands: list[Band] = []
    taken: list[tuple[int, int]] = []
    for pattern, below in ((_QUESTION_BELOW, True), (_QUESTION_ABOVE, False)):
        for found in pattern.finditer(question):
            value = float(found[1])
            bands.append(Band(None, value, high_in=False) if below else Band(value, None, False))
            taken.append(found.span())
    for found in _QUESTION_NUMBER.finditer(question):
        if not any(start <= found.start() < end for start, end in taken):
            value = float(found[1])
            bands.append(Band(value, value))
    return bands


def row_keyed_by(question: str, label: str) -> bool:
    """Whether the row labelled `label` is the one a number of `question` picks: the number
    falls in the label's band, or the question states the same bound ("under 40": "Below 40")."""
    band = label_band(label)
    if band is None:
        return False
    for asked in question_bands(question):
        if asked == band:
            return True
        if asked.low is not None and asked.low == asked.high and band.holds(asked.low):
            return True
    return False
