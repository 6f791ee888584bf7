"""A passage that names a numbered paragraph of its document ("[1.2.3]") is cited by that
paragraph's page first: a guideline PDF the test draws itself, numbered recommendations on one
page and a table restating them on another, over the real pipeline with a scripted model."""

from __future__ import annotations

from pathlib import Path

from guardrag.config.settings import Settings
from guardrag.contract import Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.paragraphs import (
    named_paragraphs,
    paragraph_map,
    references,
    states_figures,
)
from guardrag.core.kb.readers import load_entries
from tests.documents import Grid, Line, make_pdf
from tests.test_pipeline import document_bot

HEADER = "Symptom and age | Possible cancer | Action"
ROWS = [
    ["Symptom and age", "Possible cancer", "Action"],
    ["Coughing up blood, 40 and over", "Lung", "Chest X-ray within 2 weeks [1.2.3]"],
    ["Hoarse voice, 45 and over", "Larynx", "See a specialist [1.9.9]"],
]
QUESTION = "Coughing up blood at 40 and over: what action?"


def _guideline(path: Path) -> Path:
    return make_pdf(
        path,
        [
            [Line("Referral for suspected cancer (XG1)", 22), Line("Published in 2024.")],
            [
                Line("1.2 Lung cancer", 16),
                Line("1.2.3 Offer an urgent chest X-ray (to be done within 2 weeks) to assess"),
                Line("for lung cancer in people aged 40 and over with unexplained haemoptysis."),
                Line("1.2.4 Consider an urgent chest X-ray in people aged 40 and over with"),
                Line("persistent or recurrent chest infection."),
            ],
            [
                Line("Recommendations organised by symptom", 16),
                Line("The table below restates the recommendations by symptom."),
                Line("Table 1 Symptoms in adults"),
                Grid(ROWS, [160, 100, 200]),
            ],
        ],
    )


def test_references_are_numbers_in_brackets_or_after_a_paragraph_word() -> None:
    text = "Refer [1.4.1]; see recommendations 1.6.1 and 1.6.2 [2015] [1.1.2, 1.1.5]; 2.5 mg"
    assert references(text) == ["1.4.1", "1.6.1", "1.6.2", "1.1.2", "1.1.5"]


def test_the_map_holds_each_numbered_paragraph_s_chunk(tmp_path: Path) -> None:
    path = _guideline(tmp_path / "xg1.pdf")
    entries, _ = load_entries([path])
    numbered = paragraph_map(e.payload() for e in entries)[str(path)]
    assert set(numbered) == {"1.2.3", "1.2.4"}  # [1.9.9] starts no paragraph
    chunk = next(e for e in entries if e.source_id == numbered["1.2.3"])
    assert chunk.text.startswith("1.2.3 Offer") and chunk.label == "XG1 p.2"
    table = next(e for e in entries if HEADER in e.text)
    assert table.label == "XG1 p.3"
    # the row the answer restates names its paragraph; a number with no paragraph names none
    assert named_paragraphs("A chest X-ray within 2 weeks.", table.text, numbered) == ["1.2.3"]
    assert named_paragraphs("See a specialist.", table.text, numbered) == []
    # a numbered paragraph's own cross-references are not restatements
    assert named_paragraphs("X-ray [1.2.4]", f"{chunk.text} (see 1.2.4)", numbered) == []


def test_a_paragraph_goes_first_only_when_it_states_every_figure_of_the_answer() -> None:
    """An update note naming the paragraphs it amended holds figures they do not: the first
    citation must be where a reader finds the answer's figures."""
    paragraph = "1.2.3 Offer an urgent chest X-ray (within 2 weeks) to people aged 40 and over."
    assert states_figures("Chest X-ray within 2 weeks [1.2.3], aged 40 and over [2].", paragraph)
    assert states_figures("Offer an urgent chest X-ray.", paragraph)  # no figure to hold
    assert not states_figures("Recommendation 1.2.3 now uses a 3% threshold.", paragraph)
    assert not states_figures("A chest X-ray within 6 weeks.", paragraph)


def _ask(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path, draft: str, question: str
) -> tuple[Result, str]:
    """The pipeline's result over the drawn guideline with a model that drafts `draft`, and its
    trail as text for failure messages."""
    path = _guideline(tmp_path / "xg1.pdf")
    with document_bot(settings, embedder, path, "xg1", draft) as bot:
        result = bot.ask(question, "xg1")
    return result, "\n".join(f"{d.node} {d.verdict} {d.reason} {d.detail}" for d in result.trail)


def test_a_quoted_table_row_is_cited_by_the_paragraph_it_names_first(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    wrong = "People coughing up blood need a chest X-ray within 6 weeks [1]."
    result, steps = _ask(settings, embedder, tmp_path, wrong, QUESTION)
    assert result.route == "quoted", steps
    assert result.answer.endswith(
        "Coughing up blood, 40 and over | Lung | Chest X-ray within 2 weeks [1.2.3]"
    )
    assert [c.label for c in result.citations] == ["XG1 p.2 (1.2.3)", "XG1 p.3"], steps
    assert result.citations[0].source_id.startswith("xg1#1-2-lung-cancer")


def test_a_written_answer_from_the_row_renumbers_its_marker(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    right = "People aged 40 and over coughing up blood need a chest X-ray within 2 weeks [1]."
    result, steps = _ask(settings, embedder, tmp_path, right, QUESTION)
    assert result.route == "generated", steps
    assert [c.label for c in result.citations] == ["XG1 p.2 (1.2.3)", "XG1 p.3"], steps
    assert result.answer.endswith("within 2 weeks [2].")  # still the table row it drew on


def test_a_number_the_document_has_no_paragraph_for_changes_nothing(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    wrong = "A hoarse voice at 45 needs a specialist within 9 days [1]."
    question = "Hoarse voice at 45 and over: what action?"
    result, steps = _ask(settings, embedder, tmp_path, wrong, question)
    assert result.route == "quoted", steps
    assert result.answer.endswith("Hoarse voice, 45 and over | Larynx | See a specialist [1.9.9]")
    assert [c.label for c in result.citations] == ["XG1 p.3"], steps
    respond = next(d for d in result.trail if d.node == "respond")
    assert "named_paragraphs" not in respond.detail
