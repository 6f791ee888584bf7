"""The coverage demo cases that involve the model, on the real bundled model and sample KB.

A misspelt question the FAQ answers, and a Malay question the English embedding model cannot
place (the domain gate asks again in plain English). The model-free demo cases (two-part
questions, the small gym KB) are in tests/test_coverage.py.
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


def test_a_misspelt_question_offers_its_entry(real_bot: Guardrag) -> None:  # noqa: F811
    """Respelt ("password", "account"), the question ranks "How do I change my password?"
    0.01 ahead of "How do I reset my password?" (both answers point to 'Forgot password'); the
    model's rephrasing ranks the reset entry first, so the two wordings do not agree and both
    entries are offered. (Before typos were respelt, the misspelt wording ranked the reset
    entry first, the rephrasing agreed and the model wrote the answer from it: this case is the
    one the respelling cost, docs/RESULTS.md "Typos".)"""
    result = real_bot.ask("hey i forgot my pasword, how do i get bak into my acount??")
    steps = " | ".join(f"{d.node}:{d.verdict} {d.reason}" for d in result.trail)
    assert result.outcome == "choices", steps
    assert "kw-security-001" in [c.source_id for c in result.choices], steps
    assert any(step.node == "rephrase" and step.verdict == "pass" for step in result.trail)
    respelt = next(d.detail["respelt"] for d in result.trail if d.detail.get("respelt"))
    assert respelt == {"pasword": "password", "acount": "account"}


def test_a_malay_question_about_the_kb_is_answered(real_bot: Guardrag) -> None:  # noqa: F811
    answered_from(real_bot, "Macam mana nak tukar nombor telefon saya?", "kw-account-004")
