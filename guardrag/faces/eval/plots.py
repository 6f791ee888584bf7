"""The evaluation report's plots (matplotlib, files only): confusion matrix, latency, scores."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guardrag.faces.eval.evaluate import Evaluated
from guardrag.faces.eval.metrics import latency


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


def plot_confusion(confusion: dict[str, dict[str, int]], path: Path) -> Path:
    """Expected label (rows) against what the pipeline did (columns), counts in the cells."""
    plt = pyplot()
    rows = list(confusion)
    cols = sorted(
        {c for counts in confusion.values() for c in counts}, key=lambda c: (c != "answer", c)
    )
    grid = [[confusion[r].get(c, 0) for c in cols] for r in rows]
    fig, ax = plt.subplots(figsize=(1.2 + 0.75 * len(cols), 1.2 + 0.45 * len(rows)))
    ax.imshow(grid, cmap="Blues", aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_xlabel("pipeline: answer or refusal reason")
    ax.set_ylabel("golden set: expected")
    peak = max((v for line in grid for v in line), default=1) or 1
    for i, line in enumerate(grid):
        for j, value in enumerate(line):
            if value:
                ax.text(
                    j,
                    i,
                    str(value),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if value > peak / 2 else "black",
                )
    ax.set_title("Decisions and refusal reasons")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_latency(rows: Sequence[Evaluated], path: Path) -> Path:
    """End-to-end latency histogram per route (log scale), and p50/p95 per node."""
    plt = pyplot()
    summary = latency(rows)
    by_route: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        res = r.result
        by_route[res.route or "refused"].append(max(res.latency_ms, 0.1))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    values = [v for vs in by_route.values() for v in vs] or [1.0]
    bins = [
        10 ** (x / 10)
        for x in range(int(10 * math.log10(min(values))) - 1, int(10 * math.log10(max(values))) + 2)
    ]
    left.hist(list(by_route.values()), bins=bins, label=list(by_route), stacked=True)
    left.set_xscale("log")
    left.set_xlabel("end-to-end latency (ms, log)")
    left.set_ylabel("cases")
    left.legend(fontsize=8)
    left.set_title("Latency by route")
    nodes = list(summary["node"])
    p50 = [summary["node"][n]["p50"] for n in nodes]
    p95 = [summary["node"][n]["p95"] for n in nodes]
    ys = range(len(nodes))
    right.barh([y + 0.2 for y in ys], p95, height=0.4, label="p95", color="#f4a261")
    right.barh([y - 0.2 for y in ys], p50, height=0.4, label="p50", color="#2a9d8f")
    right.set_yticks(list(ys), nodes, fontsize=8)
    right.set_xscale("symlog", linthresh=1.0)
    right.set_xlabel("ms per node")
    right.legend(fontsize=8)
    right.set_title("Latency per node")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def decision_scores(rows: Sequence[Evaluated]) -> dict[str, dict[str, list[float]]]:
    """{score name: {"answer"/"refuse": values}} of the scores thresholds are applied to."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.case.expect not in ("answer", "refuse"):
            continue
        side = r.case.expect
        for d in r.result.trail:
            if d.node == "classify" and "kb" in d.detail:
                out["kb_similarity"][side].append(float(d.detail["kb"]))
            top = d.detail.get("top") if d.node == "rerank" else None
            if top:
                out["rerank_best"][side].append(float(top[0]["score"]))
                runner = float(top[1]["score"]) if len(top) > 1 else 0.0
                out["rerank_lead"][side].append(float(top[0]["score"]) - runner)
    return out


def plot_scores(
    rows: Sequence[Evaluated], thresholds: dict[str, dict[str, float]], path: Path
) -> Path:
    """Score distributions of answerable vs must-refuse cases, with the thresholds marked."""
    plt = pyplot()
    scores = decision_scores(rows)
    names = [n for n in ("kb_similarity", "rerank_best", "rerank_lead") if n in scores]
    fig, axes = plt.subplots(1, max(len(names), 1), figsize=(4.2 * max(len(names), 1), 3.4))
    axes = axes if len(names) > 1 else [axes]
    for ax, name in zip(axes, names, strict=False):
        for side, color in (("answer", "#2a9d8f"), ("refuse", "#e76f51")):
            values = scores[name].get(side, [])
            if values:
                ax.hist(
                    values,
                    bins=20,
                    range=(min(0.0, *values), 1.0),
                    alpha=0.6,
                    color=color,
                    label=f"expected {side} ({len(values)})",
                )
        for knob, value in thresholds.get(name, {}).items():
            ax.axvline(value, color="black", linestyle="--", linewidth=1)
            ax.text(
                value,
                ax.get_ylim()[1] * 0.95,
                f" {knob}={value:g}",
                fontsize=7,
                va="top",
                rotation=90,
            )
        ax.set_title(name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- Markdown -------------------------------------------------------------------------------
