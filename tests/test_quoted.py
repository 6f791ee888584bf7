"""Quote first: a document's own sentences as the answer when the model's draft fails, never a
chunk that cannot be quoted; a "Yes" that the passage contradicts; parts of a document that are
not answers (research recommendations, update information, the opening)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardrag.config.prompts import NO_ANSWER
from guardrag.config.settings import Settings
from guardrag.core.bands import row_keyed_by
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.grounding.polarity import negated_words, yes_conflict
from guardrag.core.kb.asides import aside_of, asked_about
from guardrag.core.kb.readers import load_entries
from guardrag.core.quote import Quote, answer_units, best_quote, quote_problem
from guardrag.nodes.retrieve import _answers
from tests.documents import Line, make_pdf
from tests.test_pipeline import document_bot

TABLE = (
    "Symptom | Possible cancer | Recommendation\n"
    "Dysphagia | Oesophageal | Refer using a suspected cancer pathway\n"
    "Hoarseness, 45 and over | Laryngeal | Consider a suspected cancer pathway referral\n"
)
FLAT = " ".join(
    f"Symptom {n} Possible cancer Recommendation Lump in region {n} Site {n} Consider an urgent "
    f"scan (to be done within 2 weeks) [1.{n}.1]"
    for n in range(1, 6)
)


# --- quoting: units, tables, what cannot be served ----------------------------------------


def test_a_table_row_is_quoted_under_its_header_row() -> None:
    units = answer_units(TABLE)
    assert units == [
        "Symptom | Possible cancer | Recommendation\n"
        "Dysphagia | Oesophageal | Refer using a suspected cancer pathway",
        "Symptom | Possible cancer | Recommendation\n"
        "Hoarseness, 45 and over | Laryngeal | Consider a suspected cancer pathway referral",
    ]


def test_a_table_s_caption_heads_each_row_and_is_no_unit_alone() -> None:
    caption = "Table 3 Review intervals by risk"
    units = answer_units(f"Reviews follow the table.\n{caption}\nRisk | Review\nLow | Yearly\n")
    assert units == ["Reviews follow the table.", f"{caption}\nRisk | Review\nLow | Yearly"]
    listed = answer_units(
        "Refer people if they:\n- are over 60\n- smoke\nRisk | Review\nLow | Yearly"
    )
    assert listed == [
        "Refer people if they:\n- are over 60\n- smoke",
        "Risk | Review\nLow | Yearly",
    ]


def test_a_row_without_the_question_s_terms_is_not_quoted(embedder: OnnxEmbedder) -> None:
    table = "Region | Threshold\nNorth | Use judgement\nSouth | More than 4.5\n"
    quote = best_quote("What threshold for a man aged 65?", table, embedder)
    assert quote is not None and not quote.keyed  # no row is told from the others
    problem = quote_problem(quote, 1.0, 0.3, 0.7)
    assert problem is not None and "told from the other rows" in problem


def test_the_row_whose_band_holds_the_question_s_number_is_quoted(
    embedder: OnnxEmbedder,
) -> None:
    table = (
        "Table 2 Review fee by age\nAge (years) | Fee\nBelow 40 | Ask the office\n"
        "40 to 59 | 20 pounds\n60 to 69 | 35 pounds\n70 and over | No fee\n"
    )
    quote = best_quote("What fee does a 65-year-old pay for a review?", table, embedder)
    assert quote is not None and quote.keyed and quote.text.endswith("60 to 69 | 35 pounds")
    assert quote.text.startswith("Table 2 Review fee by age\nAge (years) | Fee")
    assert quote_problem(quote, 1.0, 0.3, 0.7) is None
    under = best_quote("Is there a review fee for people under 40?", table, embedder)
    assert under is not None and under.keyed and under.text.endswith("Below 40 | Ask the office")
    older = best_quote("What does someone aged 82 pay?", table, embedder)
    assert older is not None and older.text.endswith("70 and over | No fee")


def test_bands_of_row_labels_and_questions() -> None:
    assert row_keyed_by("a 65-year-old man", "60 to 69")
    assert row_keyed_by("men under 40", "Below 40") and not row_keyed_by("men under 40", "40-49")
    assert row_keyed_by("aged 40", "40 to 49") and not row_keyed_by("aged 39", "40 to 49")
    assert row_keyed_by("aged 80", "75+") and row_keyed_by("older than 79", "Over 79")
    assert not row_keyed_by("a 65-year-old man", "Dysphagia")  # no band
    assert not row_keyed_by("a 5% rise at 65", "1 to 9")  # a percentage is a value, not a key
    assert not row_keyed_by("see recommendation 1.6.3", "1 to 9")  # a paragraph number


def test_the_row_asked_about_is_quoted_alone(embedder: OnnxEmbedder) -> None:
    quote = best_quote("What should happen for someone with hoarseness?", TABLE, embedder)
    assert quote is not None and quote.units == (1,)
    assert quote.text.startswith("Symptom | Possible cancer") and "Dysphagia" not in quote.text


def test_a_flattened_table_cannot_be_quoted() -> None:
    quote = Quote(FLAT, (0,), 0.9, 1.0)
    problem = quote_problem(quote, 1.0, 0.3, 0.7)
    assert problem is not None and problem.startswith("no sentence to quote")


def test_a_quote_without_the_question_s_key_terms_is_not_served() -> None:
    quote = Quote("Offer an urgent chest X-ray to people aged 40 and over.", (0,), 0.5, 0.2)
    problem = quote_problem(quote, 0.1, 0.3, 0.7)
    assert problem is not None and "coverage 0.10 < 0.3" in problem and "0.50 < 0.7" in problem
    assert quote_problem(quote, 0.45, 0.3, 0.7) is None  # the key terms are there
    assert quote_problem(quote, 0.1, 0.3, 0.45) is None  # or it is very close in meaning
    strict = quote_problem(quote, 0.1, 0.3, None)  # unless closeness may not stand in
    assert strict == "the quote lacks the question's key terms: coverage 0.10 < 0.3"


def test_a_long_list_with_its_lead_in_is_still_one_quote() -> None:
    items = "\n".join(f"- symptom number {n} of the list" for n in range(12))
    quote = Quote(f"Refer people if they have:\n{items}", (0,), 0.8, 0.8)
    assert quote_problem(quote, 0.8, 0.3, 0.7) is None
    longer = Quote(f"Refer people if they have:\n{items}\n{items}\n{items}", (0,), 0.8, 0.8)
    assert "words >" in (quote_problem(longer, 0.8, 0.3, 0.7) or "")


# --- a "Yes" against the passage's own polarity ------------------------------------------


@pytest.mark.parametrize(
    ("question", "draft", "passage", "why"),
    [
        (
            "Does a person with a cracked tile need an inspection before the repair?",
            "Yes, a person with a cracked tile does not need an inspection before the repair.",
            "Repairs are booked online. People with a cracked tile do not need an inspection "
            "before the repair is booked.",
            "negates",
        ),
        (
            "Is a broken window normally an urgent repair?",
            "Yes, a broken window is normally an urgent repair.",
            "Book a routine repair for a broken window. Boarding up is arranged the same day.",
            "says 'routine' where the question asks 'urgent'",
        ),
        (
            "Is the safety course mandatory for new volunteers?",
            "Yes, the course is mandatory.",
            "The safety course is optional for new volunteers.",
            "says 'optional'",
        ),
        (
            "Should a leaking boiler be reported?",
            "Yes, a leaking boiler should be reported.",
            "A leaking boiler should not be reported to the landlord by text message.",
            "negates 'report'",
        ),
    ],
)
def test_a_yes_the_passage_contradicts_is_caught(
    question: str, draft: str, passage: str, why: str
) -> None:
    conflict = yes_conflict(question, draft, passage)
    assert conflict is not None and why in conflict


@pytest.mark.parametrize(
    ("question", "draft", "passage"),
    [
        # the passage says what was asked
        (
            "Can a tenant paint the walls?",
            "Yes, a tenant can paint the walls.",
            "Tenants can paint the walls in any colour.",
        ),
        # a negation about something else than what was asked
        (
            "Is an urgent repair offered for a broken lock?",
            "Yes, an urgent repair is offered.",
            "An urgent repair is offered for a broken lock that does not close.",
        ),
        # a "No" is not judged by words; a negated question's "Yes" is ambiguous
        ("Is a broken window urgent?", "No, it is routine.", "Book a routine repair."),
        ("Isn't a broken window urgent?", "Yes.", "Book a routine repair for a broken window."),
        # "no later than" is a bound, not a negation
        (
            "Must the rent be paid by the 5th?",
            "Yes, by the 5th.",
            "Rent must be paid no later than the 5th.",
        ),
    ],
)
def test_a_yes_the_passage_agrees_with_passes(question: str, draft: str, passage: str) -> None:
    assert yes_conflict(question, draft, passage) is None


def test_a_negation_reaches_the_next_few_words() -> None:
    assert {"need", "offer"} <= negated_words("They do not need to be offered FIT.")
    assert "urgent" in negated_words("Consider a non-urgent referral.")


# --- parts of a document that are not answers --------------------------------------------


def test_research_and_update_headings_are_asides() -> None:
    assert aside_of(["Recommendations for research", "2 Primary care testing"]) == "research"
    assert aside_of(["Appendix", "Research recommendations"]) == "research"
    assert aside_of(["Update information"]) == "changes"
    assert aside_of(["Changes to this policy"]) == "changes"
    assert aside_of(["Recommendations", "1.2 Referral"]) is None
    assert asked_about("What research does the guideline call for?", "research")
    assert asked_about("What changed in the last update?", "changes")
    assert not asked_about("Does it recommend genetic testing?", "research")
    assert not asked_about("Who wrote it?", "opening")


def test_rationale_sections_are_set_aside_unless_the_question_asks_why() -> None:
    assert aside_of(["Rationale and impact", "Boarding up", "Why we made the rule"]) == "rationale"
    assert aside_of(["Repairs", "Why the panel made the recommendations"]) == "rationale"
    assert aside_of(["Appendix B", "Committee discussion"]) == "rationale"
    assert aside_of(["Basis for conclusions"]) == "rationale"
    assert aside_of(["Repairs", "1.3 Why repairs are urgent"]) is None  # a real section
    assert aside_of(["Discussion forums"]) is None
    assert asked_about("Why does the guide recommend boarding up within a day?", "rationale")
    assert asked_about("What evidence supports the repair time?", "rationale")
    assert not asked_about("What repair time applies to a broken window?", "rationale")


def test_publisher_notices_and_contents_are_not_answers() -> None:
    assert aside_of(["Your responsibility"]) == "notice" and aside_of(["Disclaimer"]) == "notice"
    assert aside_of(["Contents"]) == "opening" and aside_of(["Table of contents"]) == "opening"
    assert aside_of(["Responsibilities of the referring GP"]) is None  # a real section
    assert aside_of(["Referral", "Contents of the referral letter"]) is None
    assert asked_about("Is it mandatory to apply the recommendations?", "notice")
    assert not asked_about("When should I refer a breast lump?", "notice")


def test_asides_are_marked_at_ingest_and_set_aside_unless_asked(tmp_path: Path) -> None:
    pdf = make_pdf(
        tmp_path / "guide.pdf",
        [
            [Line("Repair guide", 22), Line("Published by the example council in 2024.")],
            [
                Line("Repairs", 16),
                Line("1.1 Book a routine repair for a broken window."),
                Line("Recommendations for research", 16),
                Line("Does boarding up windows within a day reduce break-ins?"),
                Line("Update information", 16),
                Line("In 2024 the window repair recommendation was changed."),
                Line("Rationale and impact", 16),
                Line("Why the council made the recommendation", 14),
                Line("Evidence showed that most break-ins follow within two days."),
            ],
        ],
    )
    entries, _ = load_entries([pdf])
    by_text = {e.text.split()[0]: e for e in entries}
    assert by_text["Published"].aside == "opening" and by_text["1.1"].aside is None
    assert by_text["Does"].aside == "research" and by_text["In"].aside == "changes"
    assert by_text["Evidence"].aside == "rationale"

    class Hit:
        def __init__(self, payload: dict[str, object]) -> None:
            self.id, self.payload = payload["source_id"], payload

    candidates = [Hit(e.payload()) for e in entries]
    kept, set_aside = _answers("Should broken windows be boarded up?", candidates)  # type: ignore[arg-type]
    assert {c.payload["aside"] for c in kept} == {"opening", None}
    assert sorted(set_aside.values()) == ["changes", "rationale", "research"]
    kept, _ = _answers("What changed in the 2024 update?", candidates)  # type: ignore[arg-type]
    assert "changes" in {c.payload["aside"] for c in kept}
    kept, _ = _answers("Why board up broken windows the same day?", candidates)  # type: ignore[arg-type]
    assert "rationale" in {c.payload["aside"] for c in kept}


# --- the route, over a real document and the real embedder -------------------------------


def test_an_ungrounded_draft_is_answered_with_the_table_row(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    page = tmp_path / "accounts.html"
    page.write_text(
        "<html><body><main><h1>Account terms</h1><h2>Limits</h2><table>"
        "<tr><th>Account</th><th>Monthly fee</th><th>Overdraft limit</th></tr>"
        "<tr><td>Everyday account</td><td>RM 5</td><td>RM 1,000</td></tr>"
        "<tr><td>Student account</td><td>None</td><td>RM 300</td></tr>"
        "</table><h2>Complaints</h2><p>Complaints are answered within 10 working days.</p>"
        "</main></body></html>"
    )
    draft = "The student account overdraft limit is RM 5,000 [1]."
    with document_bot(settings, embedder, page, "accounts", draft) as bot:
        result = bot.ask("What is the overdraft limit on a student account?", "accounts")
    steps = "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in result.trail)
    assert result.route == "quoted", steps
    assert result.answer == (
        "Account | Monthly fee | Overdraft limit\nStudent account | None | RM 300"
    )
    quoted = next(d for d in result.trail if d.node == "quote")
    assert quoted.score is not None and quoted.threshold == 0.3


def test_a_chunk_that_cannot_be_quoted_is_refused_with_why(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(f"# Guide\n\n## Lumps\n\n{FLAT}\n")
    draft = "Yes, a lump in region 3 always needs an MRI within 2 days [1]."
    with document_bot(settings, embedder, guide, "guide", draft) as bot:
        result = bot.ask("What scan for a lump in region 3?", "guide")
    steps = "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in result.trail)
    assert result.refusal is not None and result.refusal.reason.value == "not_grounded", steps
    assert result.refusal.stage == "quote" and result.citations == []
    quoted = next(d for d in result.trail if d.node == "quote")
    assert "no sentence to quote" in quoted.reason


def test_a_word_the_kb_never_uses_does_not_count_against_a_quote() -> None:
    from guardrag.core.kb.stats import KBStats

    stats = KBStats.from_texts(
        "s",
        [
            "Refer people with dysphagia for an endoscopy.",
            "Offer a chest X-ray to people exposed to asbestos.",
            "Consider a blood count for people with fatigue.",
        ],
    )
    question = "Is trouble swallowing reason enough for an endoscopy?"
    quote = "Refer people with dysphagia for an endoscopy."
    # "trouble", "swallowing", "reason", "enough": no entry holds them; "endoscopy" is quoted
    assert stats.known_coverage(question, quote) == 1.0
    assert stats.idf_coverage(question, quote) < 0.3
    assert stats.known_coverage(question, "Consider a blood count for people with fatigue.") == 0


# --- an answer of the kind asked -----------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "draft", "missing"),
    [
        ("How often must the filter be changed?", "The filter is part of the pump [2019].", True),
        ("How often must the filter be changed?", "Every 3 months [1].", False),
        ("How often must the filter be changed?", "Twice a year.", False),
        ("At what age can a child sign up?", "Children can sign up with a parent.", True),
        ("What minimum deposit level applies?", "A deposit of RM 50 applies.", False),
        ("How long does a refund take?", "Refunds are processed within a week.", False),
        ("What documents do I need?", "Bring your passport.", False),  # no figure asked
        # a price asked in yes/no form needs a price, or "free"
        ("Do I pay anything to send money to a bank?", "Transfers go via DuitNow [1].", True),
        ("Do I pay anything to send money to a bank?", "The first 5 are free [1].", False),
        ("Is there a fee for a new card?", "Yes, a new card costs RM 12.", False),
        ("Is there a fee for a new card?", "You can order a card in the app.", True),
        ("How do I pay my bills?", "Tap Pay Bills in the app.", False),  # no price asked
    ],
)
def test_a_question_asking_a_figure_needs_one(question: str, draft: str, missing: bool) -> None:
    from guardrag.core.grounding.kind import figure_missing

    assert (figure_missing(question, draft) is not None) is missing


def test_a_yes_the_passage_negates_is_replaced_by_the_passage_s_sentence(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    terms = tmp_path / "terms.md"
    terms.write_text(
        "# Account terms\n\n## Joint accounts\n\nJoint accounts are opened in a branch. "
        "Customers with a joint account do not need a second signature for transfers under "
        "RM 500.\n\n## Complaints\n\nComplaints are answered within 10 working days.\n"
    )
    draft = (
        "Yes, a joint account holder does not need a second signature for transfers under RM 500."
    )
    with document_bot(settings, embedder, terms, "terms", draft) as bot:
        result = bot.ask(
            "Does a joint account holder need a second signature to transfer?", "terms"
        )
    steps = "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in result.trail)
    ground = next(d for d in result.trail if d.node == "ground")
    assert "'Yes' contradicts the passage" in ground.reason, steps
    assert result.route == "quoted", steps
    assert result.answer.startswith("Customers with a joint account do not need")


def test_ng12_research_and_update_sections_are_asides_and_no_recommendation_is() -> None:
    import re

    from tests.conftest import shared

    pdf = shared("docs", "ng12", "NG12_suspected_cancer_recognition_and_referral.pdf")
    entries, _ = load_entries([pdf])
    asides = [e.aside for e in entries]
    assert asides.count("opening") == 2 and asides.count("research") >= 5  # title page, contents
    assert asides.count("changes") >= 3 and asides.count("notice") >= 1
    tables = [e for e in entries if e.text.count(" | ") >= 2 and e.page == 20]
    assert tables and all(e.aside is None for e in tables)  # the PSA table is read as rows
    numbered = [e for e in entries if re.match(r"1\.\d+\.\d+ ", e.text)]
    assert numbered and not any(e.aside for e in numbered)


def test_the_one_passage_the_model_said_no_to_is_quoted_when_it_holds_the_key_terms(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(
        "# Repair guide\n\n## Windows\n\nA broken window is boarded up on the day it is reported, "
        "even if the tenant reported a broken window earlier in the year.\n\n## Complaints\n\n"
        "Complaints are answered within 10 working days.\n"
    )
    with document_bot(settings, embedder, guide, "guide", NO_ANSWER) as bot:
        result = bot.ask(
            "My broken window was reported earlier this year. Is a broken window still boarded "
            "up on the day it is reported?",
            "guide",
        )
    with document_bot(settings, embedder, guide, "guide", NO_ANSWER) as bot:
        lay = bot.ask("Is a cracked window pane replaced by the council?", "guide")
    steps = "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in result.trail)
    assert result.route == "quoted", steps
    assert result.answer.startswith("A broken window is boarded up on the day it is reported")
    generated = next(d for d in result.trail if d.node == "generate")
    assert generated.verdict == "hit" and "do not answer" in generated.reason
    # the quote shares only "window" with a question in words the guide never uses: the
    # model's "no" stands
    steps = "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in lay.trail)
    assert lay.refusal is not None and lay.refusal.reason.value == "no_relevant_docs", steps
    assert lay.refusal.stage == "quote" and "lacks the question's key terms" in steps
