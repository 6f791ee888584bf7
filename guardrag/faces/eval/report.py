"""The evaluation report: report.md with its plots, summary.json and cases.jsonl."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from guardrag.config.run_config import DEFAULT_FAQ_ANSWER_THRESHOLD, RunConfig
from guardrag.core.kb.calibration import Calibration
from guardrag.faces.eval.evaluate import Evaluated
from guardrag.faces.eval.metrics import CLOSE_CALL_PLACES, NEAR_DUPLICATE
from guardrag.faces.eval.plots import plot_confusion, plot_latency, plot_scores


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return (
            "n/a"
            if math.isnan(value)
            else f"{value:.3f}".rstrip("0").rstrip(".")
            if value % 1
            else f"{value:g}"
        )
    return str(value)


def effective_knobs(run: RunConfig, kb_calibration: Calibration | None) -> RunConfig:
    """The knobs as the pipeline applies them to a KB (its own verbatim threshold when the run
    does not set one)."""
    if run.faq_answer_threshold is not None:
        return run
    threshold = (
        kb_calibration.faq_answer_threshold if kb_calibration else DEFAULT_FAQ_ANSWER_THRESHOLD
    )
    return run.model_copy(update={"faq_answer_threshold": threshold})


def marked_thresholds(run: RunConfig) -> dict[str, dict[str, float]]:
    """The thresholds marked on the score plots (of `effective_knobs`)."""
    return {
        "kb_similarity": {"domain_min_similarity": run.domain_min_similarity},
        "rerank_best": {
            "min_relevance": run.min_relevance,
            "faq_answer_threshold": run.faq_answer_threshold or DEFAULT_FAQ_ANSWER_THRESHOLD,
        },
        "rerank_lead": {"faq_margin": run.faq_margin},
    }


def md_table(header: Sequence[str], lines: Iterable[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_fmt(v) for v in line) + " |" for line in lines]
    return out


def render(summary: dict[str, Any], images: dict[str, str], regressions: list[str] | None) -> str:
    """The report as Markdown; `images`: {title: relative PNG path}."""
    md = _header(summary, regressions)
    md += ["## Headline", ""]
    md += md_table(["metric", "value"], [(k, v) for k, v in summary["metrics"].items()])
    md += _retrieval(summary["retrieval"])
    md += _baselines(summary)
    md += _near_duplicates(summary)
    md += _close_calls(summary)
    md += _refusals(summary)
    md += _latency(summary["latency_ms"])
    u = summary["usage"]
    md += [
        "",
        f"Tokens: {u['prompt_tokens']} prompt + {u['completion_tokens']} completion, estimated cost ${u['estimated_cost_usd']:.6f}.",
        "",
    ]
    for title, image in images.items():
        md += [f"## {title}", "", f"![{title}]({image})", ""]
    md += ["## Failures", ""]
    md += [f"- {f}" for f in summary["failures"]] or ["None."]
    return "\n".join(md) + "\n"


def _header(summary: dict[str, Any], regressions: list[str] | None) -> list[str]:
    """What was run and against which knobs, the KB's own threshold, and the regressions."""
    meta, m = summary["meta"], summary["metrics"]
    md = [
        f"# guardrag eval: {meta['golden']}",
        "",
        f"KB `{meta['kb']}`, {m['cases']} cases (lang: {meta['lang'] or 'all'}), {meta['date']}. "
        f"LLM: **{meta['model']}**. Reranker: {meta['reranker']}. Knobs: "
        f"{json.dumps(meta['knobs']) if meta['knobs'] else 'defaults'}. Retrieval top-k {meta['top_k']}.",
        "",
    ]
    if cal := meta.get("calibration"):
        md += [
            f"The KB's own verbatim-answer threshold, calibrated at ingest: "
            f"**{cal['faq_answer_threshold']}** ({cal['probes']} held-out self-probes, quantile "
            f"{cal['quantile']}; held-out median {cal['held_out_median']}, p90 "
            f"{cal['held_out_p90']}; {cal.get('method', 'self-probes')}).",
            "",
        ]
    if m["pending_llm"]:
        md += [
            f"{m['pending_llm']} cases reached generation with no LLM answering (refused "
            "`llm_unavailable`); they count as *answer* decisions and are not answered.",
            "",
        ]
    if regressions is not None:
        md += ["## Regressions against the previous run", ""]
        md += [f"- **{r}**" for r in regressions] if regressions else ["None."]
        md.append("")
    return md


def _retrieval(retrieval: dict[str, Any]) -> list[str]:
    """Retrieval against the BM25 and dense baselines, and our ratio to the better one."""
    md = ["", "## Retrieval against the baselines", ""]
    if retrieval:
        metric_names = [k for k in next(iter(retrieval.values())) if k != "cases"]
        best_baseline = (
            {
                k: max(retrieval[s][k] for s in ("bm25", "dense") if s in retrieval)
                for k in metric_names
            }
            if any(s in retrieval for s in ("bm25", "dense"))
            else {}
        )
        lines = []
        for system, values in retrieval.items():
            lines.append([system, values["cases"], *(values[k] for k in metric_names)])
        md += md_table(["system", "cases", *metric_names], lines)
        ours = retrieval.get("hybrid+rerank")
        if ours and best_baseline:
            ratios = ", ".join(
                f"{k} x{ours[k] / best_baseline[k]:.2f}" for k in metric_names if best_baseline[k]
            )
            md += ["", f"hybrid+rerank against the better baseline: {ratios}."]
    else:
        md.append("No answerable case with a gold source.")
    return md


def _baselines(summary: dict[str, Any]) -> list[str]:
    """The baselines as QA systems beside ours."""
    m = summary["metrics"]
    md = [
        "",
        "Baselines as QA systems (answer with the top entry when its score reaches a fixed threshold):",
        "",
    ]
    md += md_table(
        [
            "system",
            "threshold",
            "decision accuracy",
            "citation accuracy",
            "correct answers",
            "wrong answers",
        ],
        [
            [
                s,
                v.get("threshold"),
                v.get("decision_accuracy", m["decision_accuracy"] if s == "guardrag" else None),
                v.get("citation_accuracy", m["citation_accuracy"] if s == "guardrag" else None),
                v["correct_answers"],
                v["wrong_answers"],
            ]
            for s, v in summary["baselines"].items()
        ],
    )
    return md


def _near_duplicates(summary: dict[str, Any]) -> list[str]:
    """Answers citing no gold entry but a near-duplicate of one (a noisy label)."""
    m, md = summary["metrics"], []
    if near := summary.get("near_duplicates"):
        md += [
            "",
            f"Of the {m['answered_citing_no_gold']} answers citing no gold entry, {len(near)} cite "
            f"an entry whose question or answer is a near-duplicate of a gold one (cosine >= "
            f"{NEAR_DUPLICATE}): a noisy label more than a wrong answer.",
            "",
        ]
        md += [f"- {line}" for line in near]
    return md


#: Entry pairs listed in the report (summary.json keeps them all).
CLOSE_CALLS_SHOWN = 10


def _close_calls(summary: dict[str, Any]) -> list[str]:
    """The entry pairs that held each other back most often (`metrics.close_calls`)."""
    pairs = summary.get("close_calls") or []
    if not pairs:
        return []
    held = sum(p["questions"] for p in pairs)
    md = [
        "",
        "## Close calls",
        "",
        f"{held} questions were not answered verbatim because their best entry cleared the "
        "threshold but led a rival by less than faq_margin. A pair that ties often is two "
        "entries that overlap for those questions: where gold is mostly the best entry, making "
        "the rival's question more specific (or merging the two) lets the rule tell them apart.",
        "",
    ]
    md += md_table(
        [
            "best entry",
            "rival",
            "questions",
            "gold: best",
            "gold: rival",
            "gold: other",
            "must refuse",
        ],
        [
            (p["best"], p["rival"], p["questions"], *(p[k] for k in CLOSE_CALL_PLACES))
            for p in pairs[:CLOSE_CALLS_SHOWN]
        ],
    )
    return md


def _refusals(summary: dict[str, Any]) -> list[str]:
    """Refusals per reason given and per reason expected, and the groups' pass counts."""
    md = ["", "## Refusals", "", "Per reason the pipeline gave:", ""]
    md += md_table(
        ["reason", "refused", "precision"],
        [(k, v["refused"], v["precision"]) for k, v in summary["refusals_by_reason"].items()],
    )
    md += ["", "Per reason the golden set expects:", ""]
    md += md_table(
        ["expected", "cases", "recall"],
        [(k, v["expected"], v["recall"]) for k, v in summary["refusals_by_label"].items()],
    )
    md += ["", "## Groups", ""]
    md += md_table(
        ["group", "passed", "total"],
        [(g, c.get("passed", 0), c["total"]) for g, c in summary["groups"].items()],
    )
    md += ["", "## Answers by route", ""]
    md += md_table(
        ["route", "answered", "citing a gold entry", "citing none", "a case to refuse"],
        [
            (
                route,
                c["answered"],
                c.get("cites_gold", 0),
                c.get("citing_no_gold", 0),
                c.get("must_refuse", 0),
            )
            for route, c in summary["answers_by_route"].items()
        ],
    )
    return md


def _latency(lat: dict[str, Any]) -> list[str]:
    """Latency percentiles: in total, per route, per node."""
    md = ["", "## Latency (ms)", ""]
    md += md_table(
        ["where", "n", "p50", "p95"],
        [("total", *lat["total"].values())]
        + [(f"route {k}", *v.values()) for k, v in lat["route"].items()]
        + [(f"node {k}", *v.values()) for k, v in lat["node"].items()],
    )
    return md


def case_record(row: Evaluated) -> dict[str, Any]:
    """One case's outcome for cases.jsonl: what was asked, expected, answered and cited."""
    result = row.result
    return {
        "id": row.case.id,
        "question": row.case.question,
        "expect": row.case.label,
        "ok": row.ok,
        "why": row.why,
        "outcome": result.outcome,
        "route": result.route,
        "reason": result.refusal.reason.value if result.refusal else None,
        "stage": result.refusal.stage if result.refusal else None,
        "answer": result.answer,
        "cited": [c.source_id for c in result.citations],
        "gold": sorted(row.gold),
        "latency_ms": round(result.latency_ms, 1),
    }


def write_report(
    summary: dict[str, Any],
    rows: Sequence[Evaluated],
    out_dir: Path,
    thresholds: dict[str, dict[str, float]],
    regressions: list[str] | None = None,
) -> Path:
    """summary.json, report.md, cases.jsonl and the plots under out_dir; returns the
    report's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    images = {
        "Confusion matrix": plot_confusion(summary["confusion"], out_dir / "confusion.png").name,
        "Latency": plot_latency(rows, out_dir / "latency.png").name,
        "Scores and thresholds": plot_scores(rows, thresholds, out_dir / "scores.png").name,
    }
    (out_dir / "summary.json").write_text(
        json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8"
    )
    with (out_dir / "cases.jsonl").open("w", encoding="utf-8") as cases:
        for row in rows:
            cases.write(json.dumps(case_record(row), ensure_ascii=False) + "\n")
    report = out_dir / "report.md"
    report.write_text(render(summary, images, regressions), encoding="utf-8")
    return report
