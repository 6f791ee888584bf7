"""`guardrag eval`: case loading, metrics over hand-made results, the threshold replay, the CLI."""

from __future__ import annotations

import json
import os
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from guardrag.config.run_config import KnobError, RunConfig
from guardrag.contract import REASON_KIND, Citation, Decision, Refusal, RefusalReason, Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.calibration import Calibration
from guardrag.core.mpnet import model_dir, model_problem
from guardrag.core.second_opinion import SecondOpinion
from guardrag.core.store import Point, SparseVector
from guardrag.faces.eval import calibration
from guardrag.faces.eval import metrics as eval_metrics
from guardrag.faces.eval import report as eval_report
from guardrag.faces.eval.evaluate import (
    Case,
    Evaluated,
    GoldenError,
    is_gold,
    load_cases,
    resolve_gold,
    run_case,
)
from guardrag.faces.service import Guardrag
from tests.conftest import KB, REPO, SAMPLE_FAQ, shared
from tests.real_model import REQUIRE_MODEL, installed_model

GOLDEN = REPO / "datasets" / "ewallet" / "golden.jsonl"


# -- hand-made results ------------------------------------------------------------------------


def answered(source_id: str, route: str = "semantic_match", ms: float = 10.0) -> Result:
    return Result(
        question="q",
        request_id="r",
        outcome="answered",
        route=route,
        answer="a",
        citations=[Citation(source_id=source_id, title="t")],
        trail=[Decision(node="rerank", verdict="hit", ms=ms / 2)],
        latency_ms=ms,
    )


def refused(reason: str, stage: str = "rerank", ms: float = 5.0) -> Result:
    why = RefusalReason(reason)
    return Result(
        question="q",
        request_id="r",
        outcome="refused",
        refusal=Refusal(reason=why, stage=stage, kind=REASON_KIND[why], message="no"),
        answer="no",
        trail=[Decision(node=stage, verdict="miss", ms=ms)],
        latency_ms=ms,
    )


def row(case: Case, result: Result, gold: tuple[str, ...] = ()) -> Evaluated:
    return Evaluated(case, result, ok=True, why="", gold=frozenset(gold))


def case(cid: str, expect: str, label: str = "answer", **kw: object) -> Case:
    return Case(id=cid, question=cid, group=label, expect=expect, label=label, **kw)  # type: ignore[arg-type]


NOT_FOUND = frozenset({"no_relevant_docs", "low_confidence"})
ROWS = [
    row(case("a1", "answer"), answered("kw-1"), ("kw-1",)),  # right
    row(case("a2", "answer"), answered("kw-9"), ("kw-2",)),  # wrong source
    row(case("a3", "answer"), refused("llm_unavailable", "generate"), ("kw-3",)),  # pending
    row(case("a4", "answer"), refused("prompt_injection", "moderate_input")),  # false block
    row(case("r1", "refuse", "no_relevant_docs", reasons=NOT_FOUND), refused("no_relevant_docs")),
    row(case("r2", "refuse", "no_relevant_docs", reasons=NOT_FOUND), refused("out_of_domain")),
    row(case("r3", "refuse", "no_relevant_docs", reasons=NOT_FOUND), answered("kw-5")),
    row(
        case("b1", "refuse", "prompt_injection", reasons=frozenset({"prompt_injection"})),
        refused("prompt_injection", "moderate_input"),
    ),
]


def summary(rows: list[Evaluated] = ROWS, rankings: dict | None = None) -> dict:
    info = eval_metrics.RunInfo("g.jsonl", "kb", "none", "fused", {}, 10, "en")
    return eval_metrics.summarise(rows, rankings or {}, info)


def test_decision_refusal_citation_and_block_metrics() -> None:
    m = summary()["metrics"]
    # decisions right: a1, a2, a3 (pending counts as answer), r1, r2, b1 -> 6 of 8
    assert m["decision_accuracy"] == 0.75
    # refused: a4, r1, r2, b1 -> 3 expected; expected refused: r1, r2, r3, b1 -> 3 refused
    assert m["refusal_precision"] == 0.75 and m["refusal_recall"] == 0.75
    assert m["refusal_reason_accuracy"] == round(2 / 3, 4)  # r2's reason is not accepted
    assert m["citation_accuracy"] == 0.5  # a1 right, a2 wrong; r3 has no gold
    assert m["false_block_rate"] == round(1 / 7, 4)  # a4 among the 7 not-expected-blocked
    assert (m["answered"], m["pending_llm"]) == (3, 1)
    assert m["groundedness_pass_rate"] is None  # nothing was grounded


def test_per_reason_tables_and_confusion() -> None:
    s = summary()
    assert s["refusals_by_reason"]["out_of_domain"] == {"refused": 1, "precision": 0.0}
    assert s["refusals_by_reason"]["prompt_injection"] == {"refused": 2, "precision": 0.5}
    assert "llm_unavailable" not in s["refusals_by_reason"]  # a pending answer, not a refusal
    assert s["refusals_by_label"]["no_relevant_docs"] == {"expected": 3, "recall": round(1 / 3, 4)}
    assert s["confusion"]["no_relevant_docs"] == {
        "no_relevant_docs": 1,
        "out_of_domain": 1,
        "answer": 1,
    }


def test_latency_per_route_and_node() -> None:
    lat = summary()["latency_ms"]
    assert lat["total"]["n"] == len(ROWS)
    assert lat["route"]["semantic_match"]["n"] == 3
    assert lat["route"]["refused@moderate_input"]["p50"] == 5.0
    assert lat["node"]["rerank"]["n"] == 5
    assert eval_metrics.percentile([1, 2, 3, 4], 50) == 2.5
    assert eval_metrics.percentile([1.0, 2.0, 3.0, 4.0, 100.0], 95) == pytest.approx(80.8)


def test_retrieval_metrics_and_baseline_answers() -> None:
    rankings = {
        "a1": {"bm25": [("kw-7", 9.0), ("kw-1", 8.0)], "dense": [("kw-1", 0.9)]},
        "a2": {"bm25": [("kw-2#1", 6.0)], "dense": [("kw-5", 0.5), ("kw-2", 0.4)]},
        "r1": {"bm25": [("kw-4", 2.0)], "dense": [("kw-4", 0.7)]},
    }
    s = summary(ROWS, rankings)
    # a3 has gold but was not ranked: only ranked cases count
    assert s["retrieval"]["bm25"] == {"cases": 2, "recall@1": 0.5, "recall@10": 1.0, "mrr": 0.75}
    assert s["retrieval"]["dense"] == {"cases": 2, "recall@1": 0.5, "recall@10": 1.0, "mrr": 0.75}
    bm25, dense = s["baselines"]["bm25"], s["baselines"]["dense"]
    # bm25 (threshold 5) answers a1 wrongly and a2 rightly (a chunk of the gold document)
    assert (bm25["correct_answers"], bm25["wrong_answers"]) == (1, 1)
    # dense (0.6) answers a1 rightly and r1, which must be refused
    assert (dense["correct_answers"], dense["wrong_answers"]) == (1, 1)
    assert s["baselines"]["guardrag"] == {"correct_answers": 1, "wrong_answers": 2}


def test_compare_flags_regressions_only() -> None:
    old = summary()
    assert eval_metrics.compare(old, old) == []
    new = json.loads(json.dumps(old))
    new["metrics"]["decision_accuracy"] = 0.5
    new["metrics"]["false_block_rate"] = 0.5
    new["metrics"]["citation_accuracy"] = 0.9  # better: not flagged
    new["latency_ms"]["total"]["p95"] = old["latency_ms"]["total"]["p95"] * 3
    found = eval_metrics.compare(old, new)
    assert [f.split(":")[0] for f in found] == [
        "decision_accuracy",
        "false_block_rate",
        "latency p95",
    ]


def test_report_and_plots_are_written(tmp_path: Path) -> None:
    s = summary()
    thresholds = {"rerank_best": {"min_relevance": 0.35}}
    path = eval_report.write_report(s, ROWS, tmp_path, thresholds, regressions=["x: 1 -> 0"])
    text = path.read_text()
    assert "decision_accuracy | 0.75" in text and "**x: 1 -> 0**" in text
    for image in ("confusion.png", "latency.png", "scores.png"):
        assert (tmp_path / image).read_bytes()[:4] == b"\x89PNG"
        assert f"({image})" in text
    assert json.loads((tmp_path / "summary.json").read_text())["metrics"]["cases"] == 8
    records = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [r.case.id for r in ROWS]
    assert (
        records[1].items()
        >= {
            "cited": ["kw-9"],
            "gold": ["kw-2"],
            "route": "semantic_match",
        }.items()
    )
    assert records[4]["reason"] == "no_relevant_docs" and records[4]["answer"] == "no"


def point(source_id: str, question: list[float], answer: list[float]) -> Point:
    """A stored entry with unit-length question (title) and answer (content) vectors."""
    title, content = (np.asarray(v) / np.linalg.norm(v) for v in (question, answer))
    empty = SparseVector([], [])
    return Point(source_id, title.tolist(), empty, {"source_id": source_id}, content.tolist())


def test_wrong_answers_citing_a_near_duplicate_are_counted_apart(tmp_path: Path) -> None:
    points = [
        point("kw-2", [1, 0, 0], [0, 1, 0]),
        point("kw-9", [1, 0.2, 0], [0, 0, 1]),  # the same question as kw-2, another answer
        point("kw-3", [0, 1, 0], [1, 0, 0]),
        point("kw-4", [0, 0, 1], [1, 0.1, 0]),  # another question, the same answer as kw-3
        point("kw-5", [0, 0, 1], [0, 0, 1]),
    ]
    rows = [
        row(case("a1", "answer"), answered("kw-1"), ("kw-1",)),  # right: not counted
        row(case("a2", "answer"), answered("kw-9"), ("kw-2",)),
        row(case("a3", "answer"), answered("kw-4"), ("kw-3",)),
        row(case("a4", "answer"), answered("kw-5"), ("kw-3",)),  # wrong, and no duplicate
        row(case("r1", "refuse", "no_relevant_docs"), answered("kw-9"), ("kw-2",)),
    ]
    near = eval_metrics.near_duplicates(rows, points)
    assert near == {
        "a2": "kw-9 ~ kw-2 (question 0.98, answer 0.00)",
        "a3": "kw-4 ~ kw-3 (question 0.00, answer 1.00)",
    }
    info = eval_metrics.RunInfo("g.jsonl", "kb", "none", "fused", {}, 10, "en")
    s = eval_metrics.summarise(rows, {}, info, near_gold=near)
    assert s["metrics"]["answered_citing_no_gold"] == 3
    assert s["metrics"]["of_them_near_duplicate"] == 2
    assert s["answers_by_route"] == {
        "semantic_match": {"answered": 5, "cites_gold": 1, "citing_no_gold": 3, "must_refuse": 1}
    }
    text = eval_report.write_report(s, rows, tmp_path, {}).read_text()
    assert "Of the 3 answers citing no gold entry, 2 cite" in text
    assert "- a2: kw-9 ~ kw-2" in text
    assert "| semantic_match | 5 | 1 | 3 | 1 |" in text


def held_back(best: str, rival: str | None) -> Result:
    """Offered choices after rerank found `best` first, held back by `rival` (None: by the
    threshold, no rival named)."""
    detail: dict[str, Any] = {"top": [{"source_id": best, "score": 0.6}]}
    if rival:
        detail["rival"] = rival
    return Result(
        question="q",
        request_id="r",
        outcome="choices",
        answer="a",
        trail=[Decision(node="rerank", verdict="miss", detail=detail, ms=1.0)],
        latency_ms=1.0,
    )


def test_entry_pairs_that_hold_each_other_back_are_counted(tmp_path: Path) -> None:
    rows = [
        row(case("a1", "answer"), held_back("kw-1", "kw-2"), ("kw-1",)),
        row(case("a2", "answer"), held_back("kw-1", "kw-2"), ("kw-2",)),
        row(case("a3", "answer"), held_back("kw-1", "kw-2"), ("kw-7",)),
        row(case("r1", "refuse", "no_relevant_docs"), held_back("kw-1", "kw-2")),
        row(case("a4", "answer"), held_back("kw-3", "kw-4"), ("kw-3",)),
        row(case("a5", "answer"), held_back("kw-5", None), ("kw-5",)),  # under the threshold
        row(case("a6", "answer"), answered("kw-1"), ("kw-1",)),
    ]
    s = summary(rows)
    assert s["close_calls"] == [
        {"best": "kw-1", "rival": "kw-2", "questions": 4, "gold_best": 1, "gold_rival": 1,
         "gold_other": 1, "must_refuse": 1},
        {"best": "kw-3", "rival": "kw-4", "questions": 1, "gold_best": 1, "gold_rival": 0,
         "gold_other": 0, "must_refuse": 0},
    ]  # fmt: skip
    text = eval_report.write_report(s, rows, tmp_path, {}).read_text()
    assert "5 questions were not answered verbatim" in text
    assert "| kw-1 | kw-2 | 4 | 1 | 1 | 1 | 1 |" in text


def test_all_gold_cited_counts_answers_needing_several_sources() -> None:
    both = Result(
        question="q",
        request_id="r",
        outcome="answered",
        route="generated",
        answer="a [1] b [2]",
        citations=[Citation(source_id="d#1", title="t"), Citation(source_id="e", title="t")],
    )
    rows = [
        row(case("m1", "answer", gold_ids=("d", "e")), both, ("d", "e")),  # a chunk counts
        row(case("m2", "answer", gold_ids=("d", "e")), answered("d"), ("d", "e")),  # one of two
        row(
            case("s1", "answer", gold_ids=("d",)), answered("d"), ("d",)
        ),  # one source: not counted
        # a title substring matching two entries names alternatives, not two needed sources
        row(case("t1", "answer", gold_title="fee"), answered("d"), ("d", "e")),
    ]
    m = summary(rows)["metrics"]
    assert m["all_gold_cited"] == 0.5 and m["citation_accuracy"] == 1.0


# -- cases ------------------------------------------------------------------------------------


def test_gold_matching_and_resolution() -> None:
    assert is_gold(["doc"], "doc#2") and is_gold(["doc"], "doc")
    assert not is_gold(["doc"], "doc2") and not is_gold([], "doc")
    tngd = Case(id="t", question="q", group="retrieval", expect="answer", gold_title="SOS balance")
    titles = {"a": "What is SOS Balance?", "b": "Top up"}
    assert resolve_gold(tngd, titles) == {"a"}


def test_bad_golden_rows_are_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "q", "expected": "answer"}\n{"what": 1}\n')
    with pytest.raises(GoldenError, match=r"bad.jsonl:2: not a golden row"):
        load_cases(bad)
    bad.write_text("{oops\n")
    with pytest.raises(GoldenError, match=r"bad.jsonl:1: not valid JSON"):
        load_cases(bad)


def test_public_golden_formats() -> None:
    giq = {c.id: c for c in load_cases(shared("seeds", "guideline-iq", "golden.jsonl"))}
    low = next(c for c in giq.values() if c.label == "low_retrieval_score_pre_generation")
    assert low.reasons == NOT_FOUND and low.kind == "not_found" and low.before_generation
    tngd = load_cases(shared("seeds", "tngd-faq", "golden_set.jsonl"))
    abstain = next(c for c in tngd if c.group == "abstain")
    assert abstain.kind == "not_found" and abstain.expect == "refuse"
    assert {c.lang for c in tngd} == {"en"}


# -- calibration ------------------------------------------------------------------------------


def features(**columns: list) -> calibration.Features:
    n = len(next(iter(columns.values())))
    zeros = np.zeros(n, dtype=bool)
    base = {name: zeros for name in calibration.FLAGS}
    base.update(judged=np.ones(n, dtype=bool), kb_similarity=np.ones(n), best=np.zeros(n))
    base.update(
        lead=np.ones(n), grounded=np.zeros((n, 2), bool), grounded_ok=np.zeros((n, 2), bool)
    )
    base.update(second_lead=np.full(n, -np.inf))
    base.update({k: np.asarray(v) for k, v in columns.items()})
    return calibration.Features(grounding_grid=(0.4, 0.6), **base)


def test_simulate_replays_each_threshold() -> None:
    feat = features(
        ranked=[True, True, True, True],
        kb_similarity=[0.9, 0.9, 0.3, 0.9],
        best=[0.7, 0.5, 0.7, 0.2],
        top_faq=[True, True, True, True],
        top_ok=[True, False, True, True],
        grounded=[[True, True], [True, False], [False, False], [True, True]],
        grounded_ok=[[True, True], [False, False], [False, False], [True, True]],
    )
    grid = {
        "grounding_min_similarity": (0.4, 0.6),
        "faq_margin": (0.0,),
        "domain_min_similarity": (0.2, 0.4),
        "min_relevance": (0.1, 0.3),
        "faq_answer_threshold": (0.45, 0.6),
    }
    counts = calibration.simulate(feat, grid)
    assert counts["correct"].shape == (2, 1, 2, 2, 2)
    # loosest: case 0 verbatim right, 1 verbatim wrong, 2 verbatim right, 3 (0.2 < 0.45) generated
    assert (counts["correct"][0, 0, 0, 0, 0], counts["wrong"][0, 0, 0, 0, 0]) == (3, 1)
    # faq threshold 0.6: case 1 (0.5) goes to the LLM, whose draft is grounded but wrong at 0.4...
    assert (counts["correct"][0, 0, 0, 0, 1], counts["wrong"][0, 0, 0, 0, 1]) == (3, 1)
    # ... and refused at grounding 0.6
    assert (counts["correct"][1, 0, 0, 0, 1], counts["wrong"][1, 0, 0, 0, 1]) == (3, 0)
    # domain 0.4 refuses case 2; min_relevance 0.3 refuses case 3
    assert counts["correct"][1, 0, 1, 1, 1] == 1


def test_simulate_replays_the_second_opinion() -> None:
    """At or above the FAQ threshold but close to a rival, an entry the second opinion ranks
    first by faq_margin is answered verbatim; by less, or under the threshold, it goes on to
    the LLM (none here: pending)."""
    feat = features(
        ranked=[True, True, True],
        best=[0.5, 0.5, 0.4],
        lead=[0.01, 0.01, 0.01],
        second_lead=[0.12, 0.05, 0.12],
        top_faq=[True, True, True],
        top_ok=[True, True, True],
        pending=[True, True, True],
    )
    grid = {
        "grounding_min_similarity": (0.4,),
        "faq_margin": (0.09,),
        "domain_min_similarity": (0.2,),
        "min_relevance": (0.1,),
        "faq_answer_threshold": (0.45,),
    }
    counts = calibration.simulate(feat, grid)
    assert (counts["correct"].item(), counts["wrong"].item(), counts["pending"].item()) == (1, 0, 2)


def test_sweep_proposes_the_best_and_scores_the_current_knobs() -> None:
    rng = random.Random(3)
    n = 60
    best = [rng.uniform(0.3, 0.8) for _ in range(n)]
    feat = features(
        ranked=[True] * n,
        best=best,
        top_faq=[True] * n,
        top_ok=[b > 0.55 for b in best],  # above 0.55 the top entry is right
    )
    result = calibration.sweep(feat, penalty=5, current=RunConfig())
    assert result.proposed["knobs"]["faq_answer_threshold"] == pytest.approx(0.575, abs=0.026)
    assert result.proposed["wrong"] == 0
    assert result.current["wrong"] > 0  # 0.45 answers some wrong ones
    assert "grounding_min_similarity" in result.proposed["knobs"]
    assert result.frontier == sorted(result.frontier)


def _replayed_and_real(bot: Guardrag, every: int = 3) -> tuple[dict[str, Any], int, int, list[Any]]:
    """The collection pass + replay at the defaults, and what the pipeline itself gives on
    every `every`-th case: the replay's counts, the pipeline's right and wrong answers, and
    its results."""
    titles: dict[str, str] = {}
    cases = [c for c in load_cases(GOLDEN) if c.group in ("paraphrase", "no_answer", "exact")]
    cases = cases[::every]
    real = [run_case(bot, c, KB, frozenset(c.gold_ids)) for c in cases]
    collected = [
        run_case(bot, c, KB, resolve_gold(c, titles), calibration.COLLECT_KNOBS) for c in cases
    ]
    run = RunConfig.checked(bot.settings.knobs)
    feat = calibration.features(collected, bot.services, (0.5,), KB, run)
    info = bot.services.store.kb_info(KB)
    assert info is not None
    # at the KB's own threshold, as the pipeline applies it (and the eval CLI passes it in)
    current = eval_report.effective_knobs(run, Calibration.from_extra(info.extra))
    replay = calibration.sweep(feat, 5.0, current).current
    right = sum(
        r.result.outcome == "answered" and eval_metrics.cites_gold(r.result, r.gold) for r in real
    )
    answered = sum(r.result.outcome == "answered" for r in real)
    return replay, right, answered - right, [r.result for r in real]


@pytest.mark.slow
def test_replay_at_the_current_knobs_matches_the_pipeline(bot: Guardrag) -> None:
    """The collection pass + replay at the defaults gives what the pipeline itself gives."""
    replay, right, wrong, _ = _replayed_and_real(bot.with_services(chat_model=None))
    assert (replay["correct"], replay["wrong"]) == (right, wrong)
    assert replay["correct"] > 5


@pytest.mark.slow
def test_replay_matches_the_pipeline_with_a_second_opinion(
    bot: Guardrag, embedder: OnnxEmbedder
) -> None:
    """The same with rerank's second opinion switched on (the real all-mpnet-base-v2, which
    settles a few close leads here): the replay answers what it answers."""
    folder = model_dir(installed_model())
    if problem := model_problem(folder):
        if REQUIRE_MODEL:
            pytest.fail(problem)
        pytest.skip(problem)
    services = replace(bot.services, chat_model=None, second_opinion=SecondOpinion(folder))
    settings = bot.settings.model_copy(update={"knobs": {"second_opinion": True}})
    replay, right, wrong, results = _replayed_and_real(Guardrag(services, settings), every=1)
    settled = [r for r in results if any("second opinion" in d.reason for d in r.trail)]
    assert settled  # the stand-in did settle some unsure questions
    assert (replay["correct"], replay["wrong"]) == (right, wrong)


# -- the command ------------------------------------------------------------------------------


@pytest.mark.slow
def test_guardrag_eval_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardrag.faces.cli.main import app

    for key in [k for k in os.environ if k.startswith("GUARDRAG_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GUARDRAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GUARDRAG_LLM_LOCAL", "false")
    rows = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    subset = tmp_path / "golden.jsonl"
    subset.write_text("".join(json.dumps(r) + "\n" for r in rows[::8]))
    out = tmp_path / "report"
    args = ["eval", str(subset), "--kb", "kin", "--out", str(out), "--lang", "all"]
    done = CliRunner().invoke(app, [*args, "--ingest", str(SAMPLE_FAQ)])
    assert done.exit_code == 0, done.output
    s = json.loads((out / "summary.json").read_text())
    assert s["metrics"]["cases"] == len(rows[::8])
    assert s["metrics"]["decision_accuracy"] > 0.8
    assert {"bm25", "dense", "hybrid", "hybrid+rerank"} <= set(s["retrieval"])
    assert s["meta"]["model"].startswith("none")
    assert "## Retrieval against the baselines" in (out / "report.md").read_text()
    # a worse old run is no regression; a better one is, and exits 1
    better = json.loads(json.dumps(s))
    better["metrics"]["decision_accuracy"] = 1.0
    (tmp_path / "old.json").write_text(json.dumps(better))
    again = CliRunner().invoke(app, [*args, "--compare", str(tmp_path / "old.json")])
    assert again.exit_code == 1 and "regression: decision_accuracy" in again.output
    bad = CliRunner().invoke(app, [*args, "--knob", "nope=1"])
    assert bad.exit_code == 2 and "nope=1" in bad.output


def test_knob_overrides_are_read_as_json_and_checked() -> None:
    knobs = RunConfig.parse(["max_passages=2", "faq_generation=never", "rerank=false"])
    assert knobs == {"max_passages": 2, "faq_generation": "never", "rerank": False}
    for bad, named in (
        ("max_passages=0", "max_passages"),
        ("nope=1", "nope=1"),
        ("top_k", "top_k"),
    ):
        with pytest.raises(KnobError, match=named):
            RunConfig.parse([bad])
