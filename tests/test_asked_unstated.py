"""A question that asks for something by name the knowledge base never names ("the penalties",
"the exact wording", "the record-keeping requirements"), or about a year none of the passages
states, is refused before any model is asked (rerank; guardrag.core.grounding.kind.focus_unnamed
and year_unstated): given passages that share its other words, a model writes the missing rule
or figure itself. A KB that names the thing somewhere is left to the later checks, since a
passage that answers may list instances without the category's name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from guardrag.config.settings import Settings
from guardrag.contract import Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.grounding.kind import focus, focus_unnamed, year_unstated
from guardrag.core.kb.ingest import ingest
from guardrag.core.kb.stats import KBStats
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
        ("Record-keeping requirements for promotions?", ["record-keeping"]),
        ("What is the definition of a high-risk product?", ["high-risk", "product"]),
        ("What is meant by a vulnerable customer?", ["vulnerable", "customer"]),
        ("What are the FCA penalties for misleading promotions?", ["penalties"]),
        ("What specific kind of warnings must be shown?", ["warnings"]),
        # what names no focus: the topic, a name, a possessive, how important, a generic noun
        ("What is the FCA requirement for financial promotions?", []),
        ("What are the firm\u2019s requirements for promotions?", []),
        ("What are the key requirements for promotions?", []),
        ("What are the specific requirements for opening an account?", []),
        ("What are the Kinetic Wallet rules?", []),
        ("Can I cancel without a penalty?", []),
        ("How should risk warnings be written?", []),
        ("What kind of risk warnings should firms provide?", []),
    ],
)
def test_the_focus_is_what_the_question_asks_for_by_name(question: str, wanted: list[str]) -> None:
    assert focus(question) == wanted


STATS = KBStats.from_texts("policy", [POLICY, "Applicants are eligible at 18. We may fine a firm."])


@pytest.mark.parametrize(
    ("question", "unnamed"),
    [
        ("What is the exact wording required for risk warnings?", True),
        ("What are the record-keeping requirements for promotions?", False),  # "record", "keep"
        ("What are the eligibility criteria for promotions?", False),  # "eligible": same root
        ("What are the penalties for a misleading promotion?", False),  # "fine" is one
        ("What specific warnings must be shown?", False),  # named; which passage: later checks
        ("What is the definition of a high-risk product?", True),
        ("What must a promotion be?", False),
    ],
)
def test_a_focus_the_kb_never_names_is_why_it_cannot_answer(question: str, unnamed: bool) -> None:
    assert (focus_unnamed(question, STATS.names) is not None) is unnamed


def test_the_kb_names_a_word_in_any_of_its_forms() -> None:
    stats = KBStats.from_texts("s", ["Recordkeeping: keep each file. Applicants are eligible."])
    assert stats.names("record-keeping") and stats.names("eligibility") and stats.names("files")
    assert not stats.names("penalties") and not stats.names("font")
    assert focus_unnamed("What are the penalties for late files?", stats.names) == (
        "the question asks for 'penalties'; the KB never names it"
    )


def test_a_year_the_source_never_states_is_named() -> None:
    assert year_unstated("What were net sales for fiscal 2024?", REPORT) == (
        "the question asks about 2024; the passage never states it"
    )
    assert year_unstated("What were net sales for fiscal 2022?", REPORT) is None
    assert year_unstated("What were net sales?", REPORT) is None


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


@pytest.mark.parametrize(
    ("document", "unstated", "why", "stated", "reply"),
    [
        (
            REPORT,
            "What net sales did the company report for fiscal 2024?",
            "the question asks about 2024",
            "What net sales did the company report for fiscal 2022?",
            "Net sales for fiscal 2022 were $5.2 billion [1].",
        ),
        (
            POLICY,
            "What are the penalties for breaching the promotions policy?",
            "'penalties'; the KB never names it",
            "What are the record-keeping requirements for promotions?",
            "Records are kept for five years [1].",
        ),
    ],
)
def test_what_no_passage_can_state_is_refused_before_the_model(
    settings: Settings,
    embedder: OnnxEmbedder,
    tmp_path: Path,
    document: str,
    unstated: str,
    why: str,
    stated: str,
    reply: str,
) -> None:
    """Real embedder and store: a year no passage states, or a thing the KB never names, is
    refused `no_relevant_docs` at rerank without a model call, the year or word in the trail; a
    question asking for what the document states goes on to the model and is answered."""
    path = tmp_path / "document.md"
    path.write_text(document)
    with _bot(settings, embedder, path, "docs") as (bot, chat):
        asked = bot.ask(unstated, "docs")
        assert asked.outcome == "refused", _reasons(asked)
        assert asked.refusal is not None and asked.refusal.stage == "rerank", _reasons(asked)
        assert asked.refusal.reason.value == "no_relevant_docs", _reasons(asked)
        assert why in _reasons(asked) and chat.calls == [], _reasons(asked)
        chat.replies = [reply]
        answered = bot.ask(stated, "docs")
        assert answered.outcome == "answered", _reasons(answered)
        assert reply.removesuffix(" [1].")[-10:] in (answered.answer or "")


def test_two_words_run_together_are_no_root() -> None:
    stats = KBStats.from_texts("s", ["The form allows a change."])  # "form allows" is no "formal"
    assert stats.names("forms") and not stats.names("formalities")
