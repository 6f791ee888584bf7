"""The coverage demo cases that involve the model, on the real bundled model and sample KB.

A misspelt question the FAQ answers (the rephrasing finds the entry, too unsure to answer it
verbatim, so the answer is written from it with the plain wording beside the customer's), and a
Malay question the English embedding model cannot place (the domain gate asks again in plain
English). The model-free demo cases (two-part questions, the small gym KB) are in
tests/test_coverage.py.
"""

from __future__ import annotations

import pytest

from guardrag.faces.service import Guardrag
from tests.test_local_llm import real_bot  # noqa: F401  (the fixture: real model, sample KB)

pytestmark = pytest.mark.slow


def answered_from(bot: Guardrag, question: str, entry: str) -> None:
    result = bot.ask(question)
    steps = " | ".join(f"{d.node}:{d.verdict} {d.reason}" for d in result.trail)
    assert result.outcome == "answered", steps
    cited = [c.source_id for c in result.citations]
    assert cited and cited[0] == entry, (cited, steps)  # a written answer may cite more
    assert any(step.node == "rephrase" and step.verdict == "pass" for step in result.trail)


def test_a_misspelt_question_is_answered_from_its_entry(real_bot: Guardrag) -> None:  # noqa: F811
    answered_from(
        real_bot, "hey i forgot my pasword, how do i get bak into my acount??", "kw-security-001"
    )


def test_a_malay_question_about_the_kb_is_answered(real_bot: Guardrag) -> None:  # noqa: F811
    answered_from(real_bot, "Macam mana nak tukar nombor telefon saya?", "kw-account-004")
