"""A document passage that shares a question's words but never states what it asks for (the
penalties of a rule, the exact wording of a warning, a figure) does not answer it: the question
is refused before any model is asked (rerank), and a quote or a draft over such a passage is
refused too (guardrag.core.grounding.kind.asked_unstated). A model given the passage writes the
missing rule or figure itself. A question about a year the document never states is not
answered by a figure of another year, drafted or quoted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from guardrag.config.settings import Settings
from guardrag.contract import Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.grounding.kind import asked_unstated, focus
from guardrag.core.kb.ingest import ingest
from guardrag.core.store.server import ServerStore
from guardrag.faces.service import Guardrag, build_services
from tests.fakes import ScriptedChatModel

POLICY = """# Promotions policy

## Fair promotions

Every promotion must be fair, clear and not misleading. Risk warnings must be prominent and
written in plain language, never hidden in small print.

## Records

Keep a record of each approved promotion for five years, with the name of the approver.

## Breaches

A breach of this policy is reported to the compliance officer within two working days.
"""

REPORT = """# Annual report

## Results

Net sales for fiscal 2022 were $5.2 billion, up from $4.8 billion in fiscal 2021. Operating
margin rose to 12 percent on lower freight costs.
"""


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("What is the exact wording required for risk warnings?", ["wording"]),
        ("What specific metrics should firms use to measure outcomes?", ["metrics"]),
        ("What exact font size must risk warnings use?", ["font", "size"]),
        ("What are the record-keeping requirements for promotions?", ["record-keeping"]),
        ("What is the definition of a high-risk product?", ["high-risk", "product"]),
        ("What are the FCA penalties for misleading promotions?", ["penalties"]),
        # what names no focus: the question's topic, a name, a generic rules noun
        ("What is the FCA requirement for financial promotions?", []),
        ("Can I cancel without a penalty?", []),
        ("How should risk warnings be written?", []),
        ("What kind of risk warnings should firms provide?", []),
    ],
)
def test_the_focus_is_what_the_question_asks_for_by_name(question: str, wanted: list[str]) -> None:
    assert focus(question) == wanted


@pytest.mark.parametrize(
    ("question", "unstated"),
    [
        ("What are the record-keeping requirements for promotions?", False),  # "record" + "keep"
        ("What is the exact wording required for risk warnings?", True),
        ("What are the penalties for a misleading promotion?", True),
        ("How long must records of approved promotions be kept?", False),  # "five years"
        ("How many days do I have to report a breach?", False),  # "two working days"
        ("What were the approvals in 2023?", True),
        ("What must a promotion be?", False),
    ],
)
def test_a_passage_states_what_is_asked_or_not(question: str, unstated: bool) -> None:
    assert (asked_unstated(question, POLICY) is not None) is unstated


def test_a_passage_stating_no_figure_does_not_answer_a_figure_question() -> None:
    source = "Risk warnings must be prominent and written in plain language."
    why = asked_unstated("How many words may a risk warning have?", source)
    assert why == "the question asks for a figure; the passage states none"
    assert asked_unstated("How many words may a risk warning have?", "At most 40 words.") is None


def test_glued_and_hyphenated_spellings_are_the_same_word() -> None:
    asked = "What are the record-keeping requirements?"
    assert asked_unstated(asked, "Recordkeeping: keep each file.") is None
    assert asked_unstated(asked, "Record keeping: keep each file.") is None
    assert asked_unstated(asked, "Records are kept for a year.") is not None


def test_a_year_the_source_never_states_is_named() -> None:
    assert asked_unstated("What were net sales for fiscal 2024?", REPORT) == (
        "the question asks about 2024; the passage never states it"
    )
    assert asked_unstated("What were net sales for fiscal 2022?", REPORT) is None
    assert asked_unstated("What were net sales?", REPORT) is None


def _reasons(result: Result) -> str:
    return "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in result.trail)


@contextmanager
def _bot(
    settings: Settings, embedder: OnnxEmbedder, document: Path, kb: str
) -> Iterator[tuple[Guardrag, ScriptedChatModel]]:
    """The real embedder and an in-process Qdrant over one document, a scripted model."""
    store = ServerStore(location=":memory:")
    ingest(store, embedder, kb, [document], description=document.stem)
    chat = ScriptedChatModel()
    try:
        yield (
            Guardrag(
                build_services(settings, store=store, embedder=embedder, chat_model=chat), settings
            ),
            chat,
        )
    finally:
        store.close()


def test_a_figure_of_another_year_does_not_answer(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    report = tmp_path / "report.md"
    report.write_text(REPORT)
    with _bot(settings, embedder, report, "filings") as (bot, chat):
        chat.replies = ["The company reported net sales of $5.2 billion [1]."] * 2
        asked = bot.ask("What net sales did the company report for fiscal 2024?", "filings")
        assert asked.outcome == "refused", _reasons(asked)
        assert "the question asks about 2024" in _reasons(asked), _reasons(asked)
        chat.replies = ["Net sales for fiscal 2022 were $5.2 billion [1]."]
        stated = bot.ask("What net sales did the company report for fiscal 2022?", "filings")
        assert stated.outcome == "answered", _reasons(stated)


def test_a_question_no_passage_states_is_refused_before_the_model(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    """Real embedder and store: the unstated focus is refused at rerank without a model call;
    a question the policy states goes on to the model and is answered."""
    policy = tmp_path / "promotions.md"
    policy.write_text(POLICY)
    with _bot(settings, embedder, policy, "policy") as (bot, chat):
        chat.replies = ["Breaches are punished with a fine of 10,000 [1]."]
        asked = bot.ask("What are the penalties for breaching the promotions policy?", "policy")
        assert asked.outcome == "refused", _reasons(asked)
        assert asked.refusal is not None
        assert asked.refusal.reason.value == "no_relevant_docs"
        assert asked.refusal.stage == "rerank", _reasons(asked)
        assert "'penalties'; the passage never names it" in _reasons(asked)
        assert chat.calls == []
        chat.replies = ["Records are kept for five years [1]."]
        kept = bot.ask("How long must records of approved promotions be kept?", "policy")
        assert kept.outcome == "answered", _reasons(kept)
        assert "five years" in (kept.answer or "")


def test_a_rules_noun_at_the_opening_keeps_its_modifier() -> None:
    assert focus("Record-keeping requirements for promotions?") == ["record-keeping"]
    assert focus("What are the Kinetic Wallet rules?") == []
    assert focus("What type of risk warnings are required?") == []
    assert focus("What specific kind of warnings must be shown?") == ["warnings"]
