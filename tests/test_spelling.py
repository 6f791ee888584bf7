"""Typos respelt as the KB's own words before the question is embedded (core/spelling.py)."""

from __future__ import annotations

import pytest

from guardrag.core.kb.stats import KBStats
from guardrag.core.spelling import english_words, one_edit, respell
from guardrag.faces.service import Guardrag

KB = KBStats.from_texts(
    "s",
    [
        "How do I change my password? Open Settings and choose Change password.",
        "Can I receive money from abroad? Yes, with a foreign transfer.",
        "Where is the diner? The diner is on level 2.",
        "Withdrawals at an ATM cost RM1. That's the used card. Have you ever smoked?",
    ],
)
#: A small English word list: the real one is MiniLM's (tested below).
ENGLISH = frozenset(
    {
        "how",
        "do",
        "change",
        "my",
        "password",
        "dinner",
        "receive",
        "what",
        "the",
        "smoke",
        "is",
        "a",
        "allowed",
    }
)


def test_one_edit_adds_drops_changes_and_swaps_a_letter() -> None:
    edits = one_edit("chnage")
    assert {"change", "chnge", "chnages", "chnags"} <= edits
    assert "chnage" not in edits


@pytest.mark.parametrize(
    ("asked", "respelt", "changes"),
    [
        (
            "how do i chnage my pasword",
            "how do i change my password",
            {"chnage": "change", "pasword": "password"},
        ),
        (
            "recieve mony from abroad?",
            "receive mony from abroad?",
            {"recieve": "receive"},  # "mony": under five letters
        ),
    ],
)
def test_a_word_nobody_knows_one_edit_from_a_kb_word_is_respelt(
    asked: str, respelt: str, changes: dict[str, str]
) -> None:
    found = respell(asked, KB, ENGLISH | {"from", "abroad"})
    assert (found.question, found.changes) == (respelt, changes)


@pytest.mark.parametrize(
    "asked",
    [
        "where can I have dinner",  # an English word the KB does not use: never another word
        "Is Dinerr open?",  # a capitalised word inside the sentence is read as a name
        "is the dinerX open",  # a capital inside a word: an identifier, not a typo
        "the ussd code",  # under five letters: one edit from "used"
        "whats the fee",  # a contraction without its apostrophe
        "is a smoker allowed",  # a known word ("smoke") with an ending the word list leaves out
        "how do I chnage it",  # no word list (the tokenizer is not installed): nothing changes
        "saya tukar kata pasword",  # mostly words nobody knows: another language, not typos
    ],
)
def test_real_words_names_short_words_and_a_missing_word_list_are_left_alone(asked: str) -> None:
    known = frozenset() if "chnage" in asked else ENGLISH
    assert respell(asked, KB, known).changes == {}


def test_the_word_list_is_minilms_own() -> None:
    words = english_words()
    assert len(words) > 20_000
    assert {"change", "password", "dinner"} <= words and "chnage" not in words


def test_a_misspelt_question_is_answered_by_the_entry_it_meant(bot: Guardrag) -> None:
    """The demo's "how do i chnage my pasword" (refused after 21 s in the issue): respelt at
    classify, it is the KB's own question."""
    result = bot.ask("how do i chnage my pasword", knobs={"use_llm": False})
    assert result.outcome == "answered", result.trail
    assert [c.source_id for c in result.citations] == ["kw-security-002"]
    note = next(d for d in result.trail if d.node == "classify" and d.detail.get("respelt"))
    assert note.detail["respelt"] == {"chnage": "change", "pasword": "password"}
