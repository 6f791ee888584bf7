"""Threshold calibration: sweep the similarity, rerank and grounding thresholds on a golden set.

One pipeline pass collects, per case, the evidence each threshold is applied to, with the
swept thresholds opened wide (`COLLECT_KNOBS`): classify's best cosine to the KB, the reranked
candidates, and the LLM's draft with its passages. The sweep then replays the decisions for
every point of the grid:

    kb_similarity < domain_min_similarity               -> refused (out of domain)
    best rerank score < min_relevance                   -> refused (nothing relevant)
    best is an FAQ entry >= faq_answer_threshold and
      leads its first rival by faq_margin               -> answered verbatim with it
    or the second opinion ranks it first by faq_margin  -> answered verbatim with it
    otherwise the draft, through the real `ground` node at grounding_min_similarity
                                                        -> answered with its citations, or refused

Guard, other classify rules and the evidence-coverage rule do not depend on the swept knobs and
keep their collected outcome. An answer is correct when the case expects one and it cites a gold
source (any answer, when the case names none); every other answer is wrong. The proposal
maximises correct - penalty x wrong (ties: fewer wrong, then nearest the current knobs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from guardrag.config.run_config import DEFAULT_FAQ_ANSWER_THRESHOLD, RunConfig
from guardrag.core import verbatim
from guardrag.core.rerank import answers_in_kind
from guardrag.faces.eval.evaluate import Evaluated, is_gold
from guardrag.faces.eval.metrics import pending_llm
from guardrag.faces.eval.plots import pyplot
from guardrag.faces.eval.report import md_table
from guardrag.graph.context import Services
from guardrag.nodes.ground import ground
from guardrag.nodes.rerank import ask_second_opinion

#: Collection pass: every question that the guards and the fixed classify rules let through
#: reaches rerank, and every one that has evidence reaches the LLM (no verbatim shortcut).
COLLECT_KNOBS: dict[str, Any] = {
    "domain_min_similarity": 0.0,
    "min_relevance": 0.0,
    "faq_answer_threshold": 2.0,
    "grounding_fallback_to_faq": False,
    "second_opinion": False,  # asked in `features` instead, once per case
}


def _steps(start: float, stop: float, step: float) -> tuple[float, ...]:
    return tuple(round(x, 4) for x in np.arange(start, stop + step / 2, step))


GRID: dict[str, tuple[float, ...]] = {
    "domain_min_similarity": _steps(0.2, 0.5, 0.02),
    "min_relevance": _steps(0.2, 0.55, 0.025),
    "faq_answer_threshold": _steps(0.35, 0.8, 0.025),
    "faq_margin": (0.0, 0.03, 0.06, 0.09, 0.12),
    "grounding_min_similarity": _steps(0.35, 0.65, 0.05),
}
#: The boolean per-case columns of Features.
FLAGS = (
    "judged",
    "pre_refused",
    "exact",
    "exact_ok",
    "ranked",
    "top_faq",
    "top_ok",
    "no_generation",
    "pending",
)


@dataclass(frozen=True)
class Features:
    """Per-case arrays (length n) of everything the replayed decisions need."""

    judged: np.ndarray  # the case expects answer or refuse (others do not count)
    pre_refused: np.ndarray  # refused whatever the swept knobs (guards, other classify rules...)
    kb_similarity: np.ndarray
    exact: np.ndarray  # answered at exact_match
    exact_ok: np.ndarray
    ranked: np.ndarray  # reached rerank
    best: np.ndarray
    lead: np.ndarray
    second_lead: np.ndarray  # the second opinion's lead for the top entry; -inf: not first
    top_faq: np.ndarray
    top_ok: np.ndarray  # answering with the top entry would be correct
    no_generation: np.ndarray  # reached rerank but could not be answered by the LLM
    pending: np.ndarray  # would reach the LLM, but none answered (no model configured)
    grounded: np.ndarray  # (n, G): the draft passes `ground` at each grounding threshold
    grounded_ok: np.ndarray  # (n, G): ... and cites a gold source
    grounding_grid: tuple[float, ...]


def _correct(row: Evaluated, cited: Sequence[str]) -> bool:
    return row.case.expect == "answer" and (
        not row.gold or any(is_gold(row.gold, s) for s in cited)
    )


def features(
    rows: Sequence[Evaluated],
    services: Services,
    grounding_grid: Sequence[float],
    kb: str,
    run: RunConfig | None = None,
) -> Features:
    """Features from a collection pass run with COLLECT_KNOBS; drafts are re-grounded here with
    the real `ground` node at each grounding threshold, and the second opinion is asked about
    each FAQ ranking as rerank asks it under `run` (a single question's, not a follow-up's)."""
    run = run or RunConfig()
    runtime = Runtime(context=services)
    drafted = any(r.trace.draft for r in rows)
    grid = tuple(grounding_grid) if drafted else (0.0,)
    n, g = len(rows), len(grid)
    f = {name: np.zeros(n, dtype=bool) for name in FLAGS}
    kb_sim, best, lead = np.zeros(n), np.zeros(n), np.zeros(n)
    second = np.full(n, verbatim.NOT_ASKED)
    grounded, grounded_ok = np.zeros((n, g), dtype=bool), np.zeros((n, g), dtype=bool)
    for i, row in enumerate(rows):
        result, trace = row.result, row.trace
        f["judged"][i] = row.case.expect in ("answer", "refuse")
        kb_sim[i] = trace.kb_similarity if trace.kb_similarity is not None else -1.0
        stage = result.refusal.stage if result.refusal else None
        if result.route == "exact_match":
            f["exact"][i] = True
            f["exact_ok"][i] = _correct(row, [c.source_id for c in result.citations])
            continue
        if not trace.ranked:
            f["pre_refused"][i] = result.refusal is not None
            continue
        f["ranked"][i] = True
        top = trace.ranked[0]
        best[i] = top.score
        lead[i], _ = verbatim.lead_over_rivals(row.case.question, trace.ranked)
        f["top_faq"][i] = top.is_faq
        several = any(d.node == "rerank" and "parts" in d.detail for d in result.trail)
        opinion = (
            ask_second_opinion(row.case.question, kb, list(trace.ranked), run, runtime, {})
            if top.is_faq
            and not (several or row.case.history)
            and answers_in_kind(row.case.question, top.payload)
            else None
        )
        if opinion is not None and opinion.agrees(str(top.payload.get("source_id")), -1.0):
            second[i] = opinion.lead
        f["top_ok"][i] = _correct(row, [top.citation().source_id])
        f["pending"][i] = pending_llm(result)
        if not trace.draft or stage == "moderate_output":
            f["no_generation"][i] = True
            continue
        for j, threshold in enumerate(grid):
            update = ground(
                {
                    "question": row.case.question,
                    "kb": "",
                    "draft": trace.draft,
                    "passages": list(trace.passages),
                    "candidates": list(trace.ranked),
                },
                {"configurable": {**COLLECT_KNOBS, "grounding_min_similarity": threshold}},
                runtime,
            )
            if update.get("refusal") is None:
                grounded[i, j] = True
                grounded_ok[i, j] = _correct(row, [c.source_id for c in update["citations"]])
    return Features(
        kb_similarity=kb_sim,
        best=best,
        lead=lead,
        second_lead=second,
        grounded=grounded,
        grounded_ok=grounded_ok,
        grounding_grid=grid,
        **f,
    )


def simulate(feat: Features, grid: Mapping[str, Sequence[float]]) -> dict[str, np.ndarray]:
    """correct, wrong and pending counts for every grid point, shaped (G, M, D, R, F) in the
    order grounding_min_similarity, faq_margin, domain_min_similarity, min_relevance,
    faq_answer_threshold. grounding values must come from feat.grounding_grid."""
    dom = np.asarray(grid["domain_min_similarity"])[:, None]
    rel = np.asarray(grid["min_relevance"])[None, :, None]
    faq = np.asarray(grid["faq_answer_threshold"])[None, None, :, None]
    judged = feat.judged
    alive = ~feat.pre_refused & (feat.kb_similarity[None, :] >= dom)  # (D, n)
    exact_ok = (alive & feat.exact & feat.exact_ok & judged).sum(-1)
    exact_all = (alive & feat.exact & judged).sum(-1)
    reach = alive[:, None, :] & feat.ranked & (feat.best >= rel)  # (D, R, n)
    shape = tuple(
        len(grid[k])
        for k in (
            "grounding_min_similarity",
            "faq_margin",
            "domain_min_similarity",
            "min_relevance",
            "faq_answer_threshold",
        )
    )
    out = {k: np.zeros(shape, dtype=int) for k in ("correct", "wrong", "pending")}
    for gi, threshold in enumerate(grid["grounding_min_similarity"]):
        j = feat.grounding_grid.index(threshold) if len(feat.grounding_grid) > 1 else 0
        drafted_ok = feat.grounded[:, j] & ~feat.no_generation
        for mi, margin in enumerate(grid["faq_margin"]):
            served = reach[:, :, None, :] & verbatim.answers_verbatim(
                feat.top_faq, feat.best, feat.lead, faq, margin, feat.second_lead
            )  # (D, R, F, n)
            generated = reach[:, :, None, :] & ~served
            answered = (served | (generated & drafted_ok)) & judged
            correct = (served & feat.top_ok) | (generated & drafted_ok & feat.grounded_ok[:, j])
            n_correct = (correct & judged).sum(-1) + exact_ok[:, None, None]
            out["correct"][gi, mi] = n_correct
            out["wrong"][gi, mi] = answered.sum(-1) + exact_all[:, None, None] - n_correct
            out["pending"][gi, mi] = (generated & feat.pending & judged).sum(-1)
    return out


@dataclass(frozen=True)
class Calibration:
    penalty: float
    cases: int
    current: dict[str, Any]
    proposed: dict[str, Any]
    frontier: list[tuple[int, int]]  # (wrong, most correct with at most that many wrong)
    marginals: dict[str, list[tuple[float, float]]]  # knob -> (value, best objective)
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


#: The knobs the sweep varies, in the order of the grid's axes.
_ORDER = (
    "grounding_min_similarity",
    "faq_margin",
    "domain_min_similarity",
    "min_relevance",
    "faq_answer_threshold",
)


def sweep(
    feat: Features,
    penalty: float,
    current: RunConfig,
    grid: dict[str, Sequence[float]] | None = None,
) -> Calibration:
    """The grid's best point, the current knobs' score and the trade-off curve."""
    grid = _grid(feat, grid)
    counts = simulate(feat, grid)
    objective = counts["correct"] - penalty * counts["wrong"]
    now = {k: _knob_value(current, k) for k in _ORDER}
    chosen = _best_point(grid, counts, objective, now)
    proposed = {k: grid[k][i] for k, i in zip(_ORDER, chosen, strict=True)}
    if len(feat.grounding_grid) <= 1:
        proposed.pop("grounding_min_similarity")
    at_now = _at_current(feat, grid, now)
    pending = int(counts["pending"][chosen])
    return Calibration(
        penalty=penalty,
        cases=int(feat.judged.sum()),
        current={
            "knobs": {k: _knob_value(current, k) for k in _ORDER},
            **at_now,
            "objective": at_now["correct"] - penalty * at_now["wrong"],
        },
        proposed={
            "knobs": proposed,
            "correct": int(counts["correct"][chosen]),
            "wrong": int(counts["wrong"][chosen]),
            "pending": pending,
            "objective": float(objective.max()),
        },
        frontier=_frontier(counts),
        marginals=_marginals(grid, objective),
        notes=_notes(feat, pending),
    )


def _grid(feat: Features, grid: dict[str, Sequence[float]] | None) -> dict[str, Sequence[float]]:
    """The grid to sweep; grounding_min_similarity only over the drafts' own values."""
    grid = dict(grid or GRID)
    grid["grounding_min_similarity"] = (
        feat.grounding_grid if len(feat.grounding_grid) > 1 else (0.0,)
    )
    return grid


def _best_point(
    grid: dict[str, Sequence[float]],
    counts: dict[str, np.ndarray],
    objective: np.ndarray,
    now: dict[str, float],
) -> tuple[int, ...]:
    """The grid index of the best objective; among ties, the fewest wrong answers, then the
    nearest to the current knobs (each knob's distance relative to its span)."""
    spans = {k: (max(grid[k]) - min(grid[k])) or 1.0 for k in _ORDER}

    def distance(index: tuple[int, ...]) -> float:
        return sum(
            abs(grid[k][i] - now[k]) / spans[k]
            for k, i in zip(_ORDER, index, strict=True)
            if len(grid[k]) > 1
        )

    best_value = objective.max()
    candidates = [tuple(int(x) for x in ix) for ix in np.argwhere(objective == best_value)]
    return min(candidates, key=lambda ix: (counts["wrong"][ix], distance(ix)))


def _at_current(
    feat: Features, grid: dict[str, Sequence[float]], now: dict[str, float]
) -> dict[str, int]:
    """The counts at the current knobs (grounding at the nearest value of the grid)."""
    single = {k: [now[k]] for k in _ORDER}
    single["grounding_min_similarity"] = [
        grid["grounding_min_similarity"][
            _nearest(grid["grounding_min_similarity"], now["grounding_min_similarity"])
        ]
    ]
    return {k: int(v.ravel()[0]) for k, v in simulate(feat, single).items()}


def _frontier(counts: dict[str, np.ndarray]) -> list[tuple[int, int]]:
    """The most correct answers reachable for each number of wrong ones."""
    wrong, correct = counts["wrong"].ravel(), counts["correct"].ravel()
    frontier: list[tuple[int, int]] = []
    for w in sorted(set(wrong.tolist())):
        top = int(correct[wrong <= w].max())
        if not frontier or top > frontier[-1][1]:
            frontier.append((int(w), top))
    return frontier


def _marginals(
    grid: dict[str, Sequence[float]], objective: np.ndarray
) -> dict[str, list[tuple[float, float]]]:
    """Per knob swept, the best objective reachable at each of its values."""
    return {
        k: [(grid[k][i], float(np.take(objective, i, axis=a).max())) for i in range(len(grid[k]))]
        for a, k in enumerate(_ORDER)
        if len(grid[k]) > 1
    }


def _notes(feat: Features, pending: int) -> list[str]:
    """What the proposal could not weigh."""
    notes = []
    if len(feat.grounding_grid) <= 1:
        notes.append(
            "grounding_min_similarity not calibrated: no LLM drafted an answer in this run "
            "(install the local model or set GUARDRAG_LLM_BASE_URL)"
        )
    if pending:
        notes.append(
            f"{pending} cases would reach the LLM at the proposed knobs but none answered: they count as neither correct nor wrong"
        )
    return notes


def _nearest(values: Sequence[float], target: float) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - target))


def plot(cal: Calibration, path: Path) -> Path:
    """The trade-off curve (most correct answers for a number of wrong ones) and, per knob, the
    best objective reachable at each of its values."""
    plt = pyplot()
    panels = 1 + len(cal.marginals)
    cols = 3
    fig, axes = plt.subplots(
        (panels + cols - 1) // cols, cols, figsize=(12, 3.6 * ((panels + cols - 1) // cols))
    )
    flat = list(np.ravel(axes))
    ax = flat[0]
    wrong, correct = zip(*cal.frontier, strict=True) if cal.frontier else ((), ())
    ax.step(wrong, correct, where="post", color="#264653", label="best reachable")
    ax.scatter(
        [cal.current["wrong"]],
        [cal.current["correct"]],
        color="#e76f51",
        zorder=3,
        label="current knobs",
    )
    ax.scatter(
        [cal.proposed["wrong"]],
        [cal.proposed["correct"]],
        color="#2a9d8f",
        marker="*",
        s=140,
        zorder=3,
        label="proposed",
    )
    ax.set_xlabel("wrong answers")
    ax.set_ylabel("correct answers")
    ax.set_title(f"Trade-off (penalty {cal.penalty:g})")
    ax.legend(fontsize=7)
    for ax, (knob, curve) in zip(flat[1:], cal.marginals.items(), strict=False):
        xs, ys = zip(*curve, strict=True)
        ax.plot(xs, ys, marker=".", color="#264653")
        ax.axvline(
            float(cal.current["knobs"][knob]),
            color="#e76f51",
            linestyle="--",
            label="current",
        )
        if knob in cal.proposed["knobs"]:
            ax.axvline(
                cal.proposed["knobs"][knob], color="#2a9d8f", linestyle=":", label="proposed"
            )
        ax.set_title(knob, fontsize=9)
        ax.set_ylabel("best objective")
        ax.legend(fontsize=7)
    for ax in flat[panels:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(cal: Calibration, golden: str, model: str, image: str) -> str:
    knobs = list(cal.current["knobs"])
    md = [
        f"# guardrag eval --calibrate: {golden}",
        "",
        f"{cal.cases} judged cases; objective = correct answers - {cal.penalty:g} x wrong answers. LLM: **{model}**.",
        "",
    ]
    md += md_table(
        ["", *knobs, "correct", "wrong", "objective"],
        [
            [
                "current",
                *(cal.current["knobs"][k] for k in knobs),
                cal.current["correct"],
                cal.current["wrong"],
                cal.current["objective"],
            ],
            [
                "proposed",
                *(cal.proposed["knobs"].get(k, "-") for k in knobs),
                cal.proposed["correct"],
                cal.proposed["wrong"],
                cal.proposed["objective"],
            ],
        ],
    )
    flags = " ".join(f"--knob {k}={v:g}" for k, v in cal.proposed["knobs"].items())
    md += ["", f"Try it: `guardrag eval {golden} --kb ... {flags}`", ""]
    md += [f"- {note}" for note in cal.notes]
    md += ["", f"![trade-off]({image})", ""]
    md += ["Trade-off curve (most correct answers with at most that many wrong):", ""]
    md += md_table(["wrong", "correct"], cal.frontier)
    return "\n".join(md) + "\n"


def write(cal: Calibration, out_dir: Path, golden: str, model: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    image = plot(cal, out_dir / "calibration.png").name
    (out_dir / "calibration.json").write_text(
        json.dumps(cal.to_json(), indent=1) + "\n", encoding="utf-8"
    )
    report = out_dir / "calibration.md"
    report.write_text(render(cal, golden, model, image), encoding="utf-8")
    return report


def _knob_value(run: RunConfig, knob: str) -> float:
    """A swept knob's value in this run; the verbatim threshold left to the KB counts as the
    default (the eval CLI passes the KB's calibrated value in)."""
    value = getattr(run, knob)
    if value is None and knob == "faq_answer_threshold":
        return DEFAULT_FAQ_ANSWER_THRESHOLD
    return float(value)
