"""The learned answer decision as measured (scripts/_decision.py, scripts/fit_decision.py; not
adopted, docs/DECISION.md): its cut-off, the features it reads, the fit's pieces and the real
collection pass it fits on, so the experiment can be run again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.second_opinion import Opinion
from guardrag.core.store.server import ServerStore
from guardrag.faces.eval import calibration
from guardrag.faces.eval.evaluate import load_cases, run_case
from guardrag.faces.service import Guardrag
from guardrag.graph.state import Candidate
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import fit_decision
from _decision import FEATURES, DecisionModel, observe


def test_the_cutoff_grows_as_the_risk_shrinks() -> None:
    draw = np.random.default_rng(1)
    p = draw.random(500)
    curve = fit_decision.risk_curve(p, (draw.random(500) < p).astype(float))
    model = DecisionModel(("margin",), (0.0,), (1.0,), (1.0,), 0.0, tuple(curve), {})
    cuts = [model.cutoff(r) for r in (0.2, 0.05, 0.02, 0.01, 0.005, 0.0)]
    assert cuts == sorted(cuts)
    assert cuts[0] < cuts[-1]


def test_no_safe_cutoff_answers_nothing() -> None:
    model = DecisionModel(
        features=("margin",),
        mean=(0.0,),
        scale=(1.0,),
        coef=(1.0,),
        intercept=0.0,
        risk_curve=((0.2, 0.3), (0.8, 0.05)),
        meta={},
    )
    assert model.cutoff(0.05) == 0.8 and model.cutoff(0.5) == 0.2
    assert model.cutoff(0.01) > 1.0  # no probability reaches it


def _candidate(source_id: str, title: str, answer: str, score: float) -> Candidate:
    payload = {"kind": "faq", "source_id": source_id, "title": title, "question": title}
    payload["answer"] = payload["text"] = answer
    return Candidate(id=source_id, payload=payload, fused=0.0, dense=score, score=score)


def test_observe_measures_the_top_entry_and_the_second_opinions_view() -> None:
    ranked = [
        _candidate("a", "How do I reset my PIN?", "Open Settings, then Security.", 0.7),
        _candidate("b", "How do I close my account?", "Write to support.", 0.6),
    ]
    agrees = Opinion([("a", 0.8), ("b", 0.5)])
    seen = observe("reset my PIN", ranked, 0.65, agrees, None, 0.09)
    assert set(seen) == set(FEATURES)
    assert seen["margin"] == pytest.approx(0.05) and seen["lead"] == pytest.approx(0.1)
    assert seen["mpnet_gap"] == pytest.approx(0.3) and seen["mpnet_first"] == 1.0
    assert seen["coverage"] > 0.5
    disagrees = observe("reset my PIN", ranked, 0.65, Opinion([("b", 0.8), ("a", 0.7)]), None, 0.09)
    assert disagrees["mpnet_gap"] == pytest.approx(-0.1) and disagrees["mpnet_first"] == 0.0
    unasked = observe("reset my PIN", ranked, 0.65, None, None, 0.09)
    assert (unasked["mpnet_asked"], unasked["mpnet_gap"]) == (0.0, 0.0)
    assert (seen["rules_verbatim"], seen["rules_second"]) == (1.0, 1.0)
    assert (disagrees["rules_second"], unasked["rules_second"]) == (0.0, 0.0)


def test_the_fit_recovers_a_monotone_model_and_its_risk_curve() -> None:
    draw = np.random.default_rng(0)
    x = draw.normal(size=(400, 2))
    y = (draw.random(400) < 1 / (1 + np.exp(-(2 * x[:, 0] + x[:, 1])))).astype(float)
    model = fit_decision.fit(x, y)
    assert model["coef"][0] > model["coef"][1] > 0
    p = fit_decision.predict(model, x)
    curve = fit_decision.risk_curve(p, y)
    assert fit_decision.cutoff(curve, 0.05) >= fit_decision.cutoff(curve, 0.2)


def test_public_queries_read_as_golden_cases(tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    rows = [{"id": "q1", "question": "a?", "gold_ids": ["k1"]}, {"id": "q2", "question": "b?"}]
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    golden = tmp_path / "golden.jsonl"
    converted = fit_decision.golden_rows(queries, None)
    golden.write_text("".join(json.dumps(r) + "\n" for r in converted))
    cases = load_cases(golden)
    assert [(c.expect, c.gold_ids) for c in cases] == [("answer", ("k1",)), ("refuse", ())]


@pytest.mark.slow
def test_the_collection_pass_gives_the_decisions_rows(
    tmp_path: Path, embedder: OnnxEmbedder, bot: Guardrag
) -> None:
    """The real collection (COLLECT_KNOBS, no model) on a small KB written here: each asked
    case that reaches rerank with an FAQ entry on top gets the features and a label."""
    kb_file = tmp_path / "faq.jsonl"
    entries = [
        ("opening-hours", "When is the library open?", "Monday to Friday, 9 to 5."),
        ("late-fees", "How much is the fee for a late book?", "Ten cents a day."),
        ("card-lost", "What do I do if I lose my library card?", "Ask at the front desk."),
        ("wifi", "Does the library have wifi?", "Yes, the network is LibraryGuest."),
    ]
    kb_file.write_text(
        "".join(json.dumps({"id": i, "question": q, "answer": a}) + "\n" for i, q, a in entries)
    )
    golden = tmp_path / "golden.jsonl"
    asked: list[dict[str, object]] = [
        {"id": "g1", "question": "what are the opening hours", "expected": "answer"},
        {"id": "g2", "question": "i lost my card what now", "expected": "answer"},
        {"id": "g3", "question": "how much does parking cost at the library", "expected": "refuse"},
    ]
    asked[0]["expected_source_ids"] = ["opening-hours"]
    asked[1]["expected_source_ids"] = ["card-lost"]
    golden.write_text("".join(json.dumps(r) + "\n" for r in asked))
    store = ServerStore(location=":memory:")
    try:
        ingest(store, embedder, "library", [kb_file])
        local = bot.with_services(store=store, chat_model=None)
        rows = [
            run_case(local, c, "library", frozenset(c.gold_ids), calibration.COLLECT_KNOBS)
            for c in load_cases(golden)
        ]
        stats = local.services.kb_stats.peek("library")
        seen = {
            r.case.id: (observe(r.case.question, list(r.trace.ranked), 0.5, None, stats, 0.09), r)
            for r in rows
            if r.trace.ranked and r.trace.ranked[0].is_faq
        }
    finally:
        store.close()
    assert {"g1", "g2"} <= set(seen)
    features, row = seen["g1"]
    assert set(features) == set(FEATURES)
    assert row.trace.ranked[0].citation().source_id == "opening-hours"
    model = DecisionModel(
        features=tuple(FEATURES[:3]),
        mean=(0.5, 0.0, 0.05),
        scale=(0.1, 0.1, 0.05),
        coef=(1.0, 1.0, 1.0),
        intercept=0.0,
        risk_curve=((0.5, 0.1),),
        meta={},
    )
    assert 0.0 < model.probability(features) < 1.0
