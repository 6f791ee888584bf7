"""Evaluation metrics and regression checks between runs.

`summarise` turns judged cases (guardrag.faces.eval.evaluate.Evaluated) and the retrieval rankings into one
JSON-able summary; `write_report` writes summary.json, report.md and PNG plots; `compare` flags
metrics that got worse than in an older summary. Definitions (also in docs/EVALUATION.md):

- decision: "answer" when the pipeline answered, or decided to answer but no LLM was reachable
  (refused llm_unavailable at generate: counted as `pending_llm`); else "refuse".
- refusal precision / recall: of the refused cases, the share expected to be refused; of the
  cases expected to be refused, the share refused. Per reason: the share of refusals with that
  reason that the case accepts; per expected label: the share refused with an accepted reason.
- refusal-reason accuracy: of the cases expected to be refused and refused, the share with an
  accepted reason (and kind, and stage where the set says "before generation").
- citation accuracy: of the answered cases with gold sources, the share citing one.
- recall@k / MRR: the share of cases with gold sources that have one in the top k; the mean of
  1 / rank of the first gold source (0 when none is in the top k).
- false-block rate: of the cases not expected to be refused by the input guard, the share
  refused with kind blocked (an attack alarm on a benign question).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from guardrag.contract import REASON_KIND, RefusalReason, Result
from guardrag.core.store import Point
from guardrag.faces.eval.evaluate import PRE_GENERATION, Case, Evaluated, is_gold

Ranking = list[tuple[str, float]]
_REASONS = {r.value for r in RefusalReason}
#: The kinds only the input guard refuses with: an attack, or a message the bot does not take.
GUARD_KINDS = {"blocked", "policy"}

#: Top-1 score at or above which a baseline answers with its top entry (fixed, not tuned per
#: set): BM25 scores are unbounded IDF sums, dense ones cosines of MiniLM vectors.
BASELINE_THRESHOLDS: dict[str, float] = {"bm25": 5.0, "dense": 0.6}
#: Metrics where higher is better, compared between runs (absolute drop tolerated).
HIGHER_IS_BETTER = (
    "pass_rate",
    "decision_accuracy",
    "refusal_precision",
    "refusal_recall",
    "refusal_reason_accuracy",
    "citation_accuracy",
    "all_gold_cited",
    "groundedness_pass_rate",
)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _latency(values: Sequence[float]) -> dict[str, float | int]:
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 2) if values else math.nan,
        "p95": round(percentile(values, 95), 2),
    }


# -- per case -------------------------------------------------------------------------------


def pending_llm(result: Result) -> bool:
    """Refused only because no LLM answered: the pipeline had decided to answer."""
    refusal = result.refusal
    return refusal is not None and refusal.reason.value == "llm_unavailable"


def decision(result: Result) -> str:
    return "answer" if result.refusal is None or pending_llm(result) else "refuse"


def actual_label(result: Result) -> str:
    return "answer" if result.refusal is None else result.refusal.reason.value


def reason_accepted(case: Case, result: Result) -> bool:
    """A refusal with a reason, kind and stage the case accepts."""
    refusal = result.refusal
    if refusal is None:
        return False
    return (
        (not case.reasons or refusal.reason.value in case.reasons)
        and (not case.kind or refusal.kind == case.kind)
        and (not case.before_generation or refusal.stage in PRE_GENERATION)
    )


def cites_gold(result: Result, gold: Iterable[str]) -> bool:
    gold = tuple(gold)
    return any(is_gold(gold, c.source_id) for c in result.citations)


def citing_no_gold(rows: Iterable[Evaluated]) -> list[Evaluated]:
    """Answerable cases with gold sources, answered citing none of them."""
    return [
        r
        for r in rows
        if r.case.expect == "answer"
        and r.result.outcome == "answered"
        and r.gold
        and not cites_gold(r.result, r.gold)
    ]


def offers_gold(row: Evaluated) -> bool:
    """Entries were offered instead of an answer and one of them is gold: one click away."""
    return row.result.outcome == "choices" and any(
        is_gold(row.gold, choice.source_id) for choice in row.result.choices
    )


def _one_click(judged: Sequence[Evaluated]) -> dict[str, Any]:
    """How often a gold entry was answered or offered, of the answerable cases with gold."""
    answerable = [r for r in judged if r.case.expect == "answer" and r.gold]
    answered_gold = sum(
        r.result.outcome == "answered" and cites_gold(r.result, r.gold) for r in answerable
    )
    offered = sum(offers_gold(r) for r in answerable)
    return {
        "offered_choices": sum(r.result.outcome == "choices" for r in judged),
        "resolved_in_one_click": offered,
        "gold_answered_or_offered": _ratio(answered_gold + offered, len(answerable)),
    }


#: Where the gold entry was, for a question two entries held back (`close_calls`).
CLOSE_CALL_PLACES = ("gold_best", "gold_rival", "gold_other", "must_refuse")


def close_calls(rows: Iterable[Evaluated]) -> list[dict[str, Any]]:
    """Entry pairs that held each other back: the questions left unanswered because their best
    FAQ entry cleared the KB's threshold but led `rival` by less than `faq_margin` (rerank's
    trail names it), per (best, rival) pair, most questions first, with where gold was. A pair
    that ties often is two entries that overlap for those questions."""
    pairs: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in rows:
        if r.result.outcome == "answered":
            continue
        decided = [d for d in r.result.trail if d.node == "rerank"]
        if not decided:
            continue
        rival, top = decided[-1].detail.get("rival"), decided[-1].detail.get("top")
        if not (rival and top):
            continue
        best = str(top[0]["source_id"])
        if r.case.expect == "refuse":
            place = "must_refuse"
        else:
            place = (
                "gold_best" if best in r.gold else "gold_rival" if rival in r.gold else "gold_other"
            )
        pairs[best, str(rival)].update(("questions", place))
    found = [
        {"best": best, "rival": rival, **{k: counts[k] for k in ("questions", *CLOSE_CALL_PLACES)}}
        for (best, rival), counts in pairs.items()
    ]
    return sorted(found, key=lambda p: (-p["questions"], p["best"], p["rival"]))


#: Two entries are near-duplicates when their questions, or their answers, are at least this
#: close (cosine of the stored MiniLM vectors).
NEAR_DUPLICATE = 0.8


def near_duplicates(rows: Iterable[Evaluated], points: Iterable[Point]) -> dict[str, str]:
    """The answers citing no gold entry that cite one nearly the same as a gold entry,
    {case id: how}.

    A golden set's labels are noisy where its KB says one thing twice (covidfaq has several
    entries on where the virus came from): such an answer counts as wrong, and the report says
    how many of the wrong ones are of this kind instead of hiding them in the count."""
    vectors = {
        str(p.payload.get("source_id")): (np.asarray(p.dense), np.asarray(p.content or p.dense))
        for p in points
    }
    found: dict[str, str] = {}
    for row in citing_no_gold(rows):
        cited = [c.source_id for c in row.result.citations]
        pairs = [(c, g) for c in cited for g in sorted(row.gold) if c in vectors and g in vectors]
        for c, g in pairs:
            question = float(vectors[c][0] @ vectors[g][0])
            answer = float(vectors[c][1] @ vectors[g][1])
            if max(question, answer) >= NEAR_DUPLICATE:
                found[row.case.id] = f"{c} ~ {g} (question {question:.2f}, answer {answer:.2f})"
                break
    return found


def cites_all_gold(result: Result, gold: Iterable[str]) -> bool:
    """Every gold source is cited (for questions whose answer needs several passages)."""
    return all(cites_gold(result, (g,)) for g in gold)


def first_gold_rank(ranking: Ranking, gold: frozenset[str]) -> int | None:
    """1-based rank of the first gold source, or None."""
    return next((i for i, (sid, _) in enumerate(ranking, 1) if is_gold(gold, sid)), None)


# -- summary --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunInfo:
    """What produced the numbers, printed at the top of the report."""

    golden: str
    kb: str
    model: str
    reranker: str
    knobs: dict[str, Any]
    top_k: int
    lang: str
    date: str = ""
    calibration: dict[str, Any] | None = None  # the KB's own, from ingest (kb/calibration.py)


def summarise(
    rows: Sequence[Evaluated],
    rankings: dict[str, dict[str, Ranking]],
    info: RunInfo,
    baseline_thresholds: dict[str, float] | None = None,
    near_gold: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Every metric of one evaluation run, JSON-able. `rankings`: {case id: {system: ranking}};
    `near_gold`: the wrong answers that cite a near-duplicate of a gold entry
    (`near_duplicates`)."""
    near_gold = near_gold or {}
    judged = [r for r in rows if r.case.expect in ("answer", "refuse")]
    expect_refuse = [r for r in judged if r.case.expect == "refuse"]
    refused = [r for r in judged if decision(r.result) == "refuse"]
    refused_ok = [r for r in expect_refuse if decision(r.result) == "refuse"]
    answered_gold = [r for r in judged if r.result.outcome == "answered" and r.gold]
    # several gold ids that are all needed (GuidelineIQ's chunks), not TNGD's title alternatives
    multi_gold = [r for r in answered_gold if len(r.case.gold_ids) > 1 and not r.case.gold_title]
    grounded = [d for r in rows for d in r.result.trail if d.node == "ground"]
    benign = [r for r in rows if r.case.kind not in GUARD_KINDS and not _guard_refusal(r.case)]
    metrics = {
        "cases": len(rows),
        "pass_rate": _ratio(sum(r.ok for r in rows), len(rows)),
        "decision_accuracy": _ratio(
            sum(decision(r.result) == _expected_decision(r.case) for r in judged), len(judged)
        ),
        "refusal_precision": _ratio(sum(r.case.expect == "refuse" for r in refused), len(refused)),
        "refusal_recall": _ratio(len(refused_ok), len(expect_refuse)),
        "refusal_reason_accuracy": _ratio(
            sum(reason_accepted(r.case, r.result) for r in refused_ok), len(refused_ok)
        ),
        "citation_accuracy": _ratio(
            sum(cites_gold(r.result, r.gold) for r in answered_gold), len(answered_gold)
        ),
        "all_gold_cited": _ratio(
            sum(cites_all_gold(r.result, r.gold) for r in multi_gold), len(multi_gold)
        ),
        "groundedness_pass_rate": _ratio(sum(d.verdict == "pass" for d in grounded), len(grounded)),
        "false_block_rate": _ratio(
            sum(
                r.result.refusal is not None and r.result.refusal.kind == "blocked" for r in benign
            ),
            len(benign),
        ),
        "answered": sum(r.result.outcome == "answered" for r in rows),
        "answered_citing_no_gold": len(citing_no_gold(rows)),
        "of_them_near_duplicate": len(near_gold),
        **_one_click(judged),
        "pending_llm": sum(pending_llm(r.result) for r in rows),
    }
    return {
        "meta": {**info.__dict__},
        "metrics": metrics,
        "groups": _groups(rows),
        "answers_by_route": _by_route(rows),
        "refusals_by_reason": _by_reason(refused),
        "refusals_by_label": _by_label(expect_refuse),
        "confusion": _confusion(rows),
        "retrieval": retrieval_metrics(rows, rankings, info.top_k),
        "baselines": baseline_answers(judged, rankings, baseline_thresholds or BASELINE_THRESHOLDS),
        "latency_ms": latency(rows),
        "usage": _usage(rows),
        "near_duplicates": [f"{case}: {how}" for case, how in sorted(near_gold.items())],
        "close_calls": close_calls(judged),
        "failures": [
            f"{r.case.id} [{r.case.group}] {r.case.question!r}: {r.why}" for r in rows if not r.ok
        ],
    }


def _expected_decision(case: Case) -> str:
    return "answer" if case.expect == "answer" else "refuse"


def _guard_refusal(case: Case) -> bool:
    """Expected to be refused by the input guard only (an attack or a policy refusal), so the
    case is no benign question a block could wrong."""
    kinds = {REASON_KIND[RefusalReason(r)] for r in case.reasons if r in _REASONS}
    return case.expect == "refuse" and bool(kinds) and kinds <= GUARD_KINDS


def _groups(rows: Sequence[Evaluated]) -> dict[str, dict[str, int]]:
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        groups[r.case.group]["total"] += 1
        groups[r.case.group]["passed"] += r.ok
    return {g: dict(c) for g, c in sorted(groups.items())}


def _by_route(rows: Sequence[Evaluated]) -> dict[str, dict[str, int]]:
    """Answers per route (verbatim, written by the model, quoted): how many cite a gold entry,
    how many cite none, how many answer a case that must be refused; a route's wrong answers
    counted apart, so a change to one route is measured on it."""
    routes: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        if r.result.outcome != "answered":
            continue
        counts = routes[r.result.route or "none"]
        counts["answered"] += 1
        if r.case.expect != "answer":
            counts["must_refuse"] += 1
        elif r.gold:
            counts["cites_gold" if cites_gold(r.result, r.gold) else "citing_no_gold"] += 1
    return {route: dict(c) for route, c in sorted(routes.items())}


def _by_reason(refused: Sequence[Evaluated]) -> dict[str, dict[str, float | int | None]]:
    """Per reason given (pending-LLM cases are answer decisions, so not here)."""
    judged = refused
    out: dict[str, dict[str, float | int | None]] = {}
    reasons = Counter(r.result.refusal.reason.value for r in judged if r.result.refusal)
    for reason, count in sorted(reasons.items()):
        right = sum(
            r.result.refusal is not None
            and r.result.refusal.reason.value == reason
            and r.case.expect == "refuse"
            and reason_accepted(r.case, r.result)
            for r in judged
        )
        out[reason] = {"refused": count, "precision": _ratio(right, count)}
    return out


def _by_label(expect_refuse: Sequence[Evaluated]) -> dict[str, dict[str, float | int | None]]:
    labels = Counter(r.case.label for r in expect_refuse)
    return {
        label: {
            "expected": count,
            "recall": _ratio(
                sum(
                    reason_accepted(r.case, r.result)
                    for r in expect_refuse
                    if r.case.label == label
                ),
                count,
            ),
        }
        for label, count in sorted(labels.items())
    }


def _confusion(rows: Sequence[Evaluated]) -> dict[str, dict[str, int]]:
    """{expected label: {actual label: count}}."""
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        table[r.case.label][actual_label(r.result)] += 1
    return {k: dict(v) for k, v in sorted(table.items())}


def retrieval_metrics(
    rows: Sequence[Evaluated], rankings: dict[str, dict[str, Ranking]], top_k: int
) -> dict[str, dict[str, float | int]]:
    """recall@1, recall@k and MRR per retrieval system, over the answerable cases with gold."""
    gold_rows = [r for r in rows if r.case.expect == "answer" and r.gold and r.case.id in rankings]
    systems = sorted({s for r in gold_rows for s in rankings[r.case.id]})
    out = {}
    for system in systems:
        ranks = [first_gold_rank(rankings[r.case.id][system][:top_k], r.gold) for r in gold_rows]
        n = len(ranks)
        out[system] = {
            "cases": n,
            "recall@1": round(sum(k == 1 for k in ranks) / n, 4),
            f"recall@{top_k}": round(sum(k is not None for k in ranks) / n, 4),
            "mrr": round(sum(1 / k for k in ranks if k) / n, 4),
        }
    return out


def baseline_answers(
    judged: Sequence[Evaluated],
    rankings: dict[str, dict[str, Ranking]],
    thresholds: dict[str, float],
) -> dict[str, dict[str, Any]]:
    """Each baseline as a QA system: answer with its top entry when the score reaches its fixed
    threshold, else refuse; scored like the pipeline (no guards, no LLM)."""
    out: dict[str, dict[str, Any]] = {}
    for system, threshold in thresholds.items():
        correct = wrong = right_decision = answered_gold = cited = 0
        for r in judged:
            ranking = rankings.get(r.case.id, {}).get(system, [])
            answers = bool(ranking) and ranking[0][1] >= threshold
            right_decision += answers == (r.case.expect == "answer")
            if not answers:
                continue
            hit = is_gold(r.gold, ranking[0][0])
            if r.gold:
                answered_gold += 1
                cited += hit
            good = r.case.expect == "answer" and (hit or not r.gold)
            correct += good
            wrong += not good
        out[system] = {
            "threshold": threshold,
            "decision_accuracy": _ratio(right_decision, len(judged)),
            "citation_accuracy": _ratio(cited, answered_gold),
            "correct_answers": correct,
            "wrong_answers": wrong,
        }
    correct = sum(
        r.result.outcome == "answered"
        and r.case.expect == "answer"
        and (not r.gold or cites_gold(r.result, r.gold))
        for r in judged
    )
    answered = sum(r.result.outcome == "answered" for r in judged)
    out["guardrag"] = {"correct_answers": correct, "wrong_answers": answered - correct}
    return out


def latency(rows: Sequence[Evaluated]) -> dict[str, Any]:
    """p50/p95 end to end, per route (answered) or refusing stage, and per node."""
    by_route: dict[str, list[float]] = defaultdict(list)
    by_node: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        res = r.result
        by_route[
            res.route
            if res.refusal is None and res.route
            else f"refused@{res.refusal.stage if res.refusal else '?'}"
        ].append(res.latency_ms)
        for d in res.trail:
            by_node[d.node].append(d.ms)
    return {
        "total": _latency([r.result.latency_ms for r in rows]),
        "route": {k: _latency(v) for k, v in sorted(by_route.items())},
        "node": {k: _latency(v) for k, v in sorted(by_node.items())},
    }


def _usage(rows: Sequence[Evaluated]) -> dict[str, float | int]:
    return {
        "prompt_tokens": sum(r.result.usage.prompt_tokens for r in rows),
        "completion_tokens": sum(r.result.usage.completion_tokens for r in rows),
        "estimated_cost_usd": round(sum(r.result.usage.estimated_cost_usd for r in rows), 6),
    }


# -- comparison -----------------------------------------------------------------------------


def compare(
    old: dict[str, Any], new: dict[str, Any], tolerance: float = 0.01, latency_factor: float = 1.2
) -> list[str]:
    """Regressions of `new` against `old`: a rate that fell (or a false-block rate that rose) by
    more than `tolerance`, retrieval that got worse, p50/p95 latency up by more than
    `latency_factor` (and 1 ms)."""
    found = []

    def worse(name: str, before: Any, after: Any, higher_better: bool = True) -> None:
        if not isinstance(before, int | float) or not isinstance(after, int | float):
            return
        drop = (before - after) if higher_better else (after - before)
        if drop > tolerance:
            found.append(f"{name}: {before:g} -> {after:g}")

    old_m, new_m = old.get("metrics", {}), new.get("metrics", {})
    for name in HIGHER_IS_BETTER:
        worse(name, old_m.get(name), new_m.get(name))
    worse("false_block_rate", old_m.get("false_block_rate"), new_m.get("false_block_rate"), False)
    for system, values in new.get("retrieval", {}).items():
        for metric, after in values.items():
            if metric != "cases":
                worse(
                    f"retrieval {system} {metric}",
                    old.get("retrieval", {}).get(system, {}).get(metric),
                    after,
                )
    old_total = old.get("latency_ms", {}).get("total", {})
    for q in ("p50", "p95"):
        before, after = old_total.get(q), new.get("latency_ms", {}).get("total", {}).get(q)
        numbers = isinstance(before, int | float) and isinstance(after, int | float)
        if numbers and after > before * latency_factor and after - before > 1.0:
            found.append(f"latency {q}: {before:g} ms -> {after:g} ms")
    return found


def load_summary(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable summary.json ({exc})") from None
    if not isinstance(data, dict) or "metrics" not in data:
        raise ValueError(f"{path}: not a guardrag eval summary (no 'metrics')")
    return data


# -- plots ----------------------------------------------------------------------------------
