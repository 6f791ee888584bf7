"""Quoting a document passage: the sentences that answer the question, not the whole chunk."""

from __future__ import annotations

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.quote import answer_units, best_quote

CHUNK = (
    "1.1.5 Offer an urgent chest X-ray to assess for mesothelioma in people aged 40 and over "
    "who have been exposed to asbestos.\n"
    "1.2.1 Offer an urgent direct access upper gastrointestinal endoscopy to people with "
    "dysphagia to assess for oesophageal cancer.\n"
    "1.2.3 Refer people using a suspected cancer pathway referral if they are aged 55 and over "
    "and have:\n"
    "- weight loss and\n"
    "- upper abdominal pain or reflux or dyspepsia.\n"
)


def test_a_list_stays_with_its_lead_in() -> None:
    units = answer_units(CHUNK)
    assert len(units) == 3
    assert units[2].startswith("1.2.3 Refer people") and "- upper abdominal pain" in units[2]


def test_the_quote_is_the_recommendation_asked_about(embedder: OnnxEmbedder) -> None:
    quote = best_quote("I have trouble swallowing food, what test should I get?", CHUNK, embedder)
    assert quote is not None and "dysphagia" in quote.text
    assert "mesothelioma" not in quote.text  # the chunk's first recommendation answers another


def test_an_empty_passage_has_no_quote(embedder: OnnxEmbedder) -> None:
    assert best_quote("anything?", "  \n", embedder) is None
