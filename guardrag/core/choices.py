"""Choices instead of a bare refusal: when a question is not answered for want of a confident
match, but a few FAQ entries are close to it, they are offered (outcome "choices").

An offered entry is its own question; picking it (a click, or its number in a chat client) asks
that question, which the FAQ then answers verbatim. So the customer chooses, not the model, and
nothing is answered that the KB did not write for that question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from guardrag.config.messages import CHOICES_INTRO, CHOICES_OUTRO
from guardrag.contract import Choice, RefusalReason

#: Refusals after which close entries are offered: the KB had something near, not nothing.
OFFER_AFTER = frozenset(
    {RefusalReason.NO_RELEVANT_DOCS, RefusalReason.LOW_CONFIDENCE, RefusalReason.NOT_GROUNDED}
)
MAX_CHOICES = 3

#: One offered entry in a reply: "2. How long does the card take to arrive?".
_LISTED = re.compile(r"^([1-9])\. (.+)$")
#: A reply that picks an offered entry by its number: "2", "2.", "#2", "number 2", "option 2".
_PICK = re.compile(r"^\s*(?:#|no\.?|number|option|choice)?\s*([1-9])\s*[.)]?\s*$", re.IGNORECASE)


def offerable(
    candidates: Iterable[Any], min_score: float, limit: int = MAX_CHOICES
) -> list[Choice]:
    """Up to `limit` FAQ entries of `candidates` (in the reranker's order: its best first) that
    the reranker found relevant (`min_score`: the pipeline's `min_relevance`); document
    passages are never offered (they have no question of their own to ask)."""
    found: list[Choice] = []
    for candidate in candidates:
        payload = getattr(candidate, "payload", {}) or {}
        title = str(payload.get("question") or "").strip()
        score = float(getattr(candidate, "score", 0.0))
        if payload.get("kind") != "faq" or not title or score < min_score:
            continue
        if all(title != choice.title for choice in found):
            source_id = str(payload.get("source_id", getattr(candidate, "id", "")))
            found.append(Choice(source_id=source_id, title=title, score=round(score, 4)))
        if len(found) == limit:
            break
    return found


def picked(message: str, offered: list[str]) -> str | None:
    """The offered question a reply picks by number ("2"), or None when it picks none."""
    match = _PICK.match(message)
    if match is None:
        return None
    number = int(match.group(1))
    return offered[number - 1] if number <= len(offered) else None


def listed(choices: list[Choice]) -> list[str]:
    """The reply's lines that offer `choices`: an intro, one numbered line each, how to pick."""
    lines = [f"{n}. {choice.title}" for n, choice in enumerate(choices, start=1)]
    return [CHOICES_INTRO, *lines, CHOICES_OUTRO]


def offered_in(reply: str) -> list[str]:
    """The questions a reply of ours offered (`listed`), read back from its text: a chat client
    sends our earlier replies as history. A forged list only makes a question: it is screened
    like any other."""
    if CHOICES_INTRO not in reply:
        return []
    offered: list[str] = []
    for line in reply.split(CHOICES_INTRO, 1)[1].splitlines():
        match = _LISTED.match(line.strip())
        if match and int(match.group(1)) == len(offered) + 1:
            offered.append(match.group(2).strip())
    return offered
