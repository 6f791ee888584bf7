"""Fit the learned answer decision (measured, not adopted: docs/DECISION.md) and write the model
to `_decision.MODEL_PATH` (outside the repository).

    .venv/bin/python scripts/fit_decision.py                   # collect (cached), LOKO, fit, write
    .venv/bin/python scripts/fit_decision.py --dry-run         # ... report only, write nothing
    .venv/bin/python scripts/fit_decision.py --heldout covid   # once, after the choice: the held-out
                                                               # covidfaq check (never fits on it)

Every FITTING knowledge base is ingested into a scratch data dir and its golden cases asked with
the calibration collection knobs (`guardrag.faces.eval.calibration.COLLECT_KNOBS`, no chat
model), in a child process per KB; the rows are cached as JSON lines in `--cache` (outside the
repo; delete a KB's file to collect it again). One row per case that reaches rerank with an FAQ
entry on top, is one part, has no history and that entry answers in kind: the features
`_decision.observe` measures there, and label =
answering with the top entry is right (a case that must be refused: 0).

The fitting KBs: our golden sets (ewallet, telco, gym, courier), TNGD, and the public FAQ sets
dstc11-hotel-restaurant-faq (SAMPLE queries, fixed seed), medquad-liveqa and
semeval16-qatarliving (../shared/data/faq: a query with gold_ids is answerable with those, one
with none must be refused). covidfaq is held out: it is collected only with `--heldout`, and
only scored, with the model already chosen and fitted.

The model is a logistic regression (numpy Newton, L2) over standardised features; each
candidate feature set is judged leave-one-KB-out: fit on the other KBs, take the cut-off for a
risk from the other KBs' own leave-one-out predictions, and count answered-right and
answered-wrong on the KB left out, beside today's rules replayed on the same cases. The shipped
fit uses every fitting KB; its risk curve comes from the pooled leave-one-KB-out predictions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _decision import FEATURES, MODEL_PATH, rules_verdicts  # noqa: E402
from _decision import cutoff_for as cutoff  # noqa: E402

from guardrag.config.run_config import RunConfig  # noqa: E402
from guardrag.core import verbatim  # noqa: E402

#: The public data (../shared/data beside the checkout unless GUARDRAG_SHARED_DATA says).
SHARED = Path(os.environ.get("GUARDRAG_SHARED_DATA", REPO.parent / "shared" / "data"))
#: The bundled models (the second opinion): GUARDRAG_LLM_MODEL_DIR, else the checkout's data/.
MODELS = Path(os.environ.get("GUARDRAG_LLM_MODEL_DIR", REPO / "data" / "models"))
PUBLIC = ("dstc11-hotel-restaurant-faq", "medquad-liveqa", "semeval16-qatarliving")
#: dstc11 has 2,054 queries: a fixed sample keeps the collection short.
SAMPLE = 600
SEED = 37
L2 = 1.0
RISKS = (0.01, 0.02, 0.05)
#: The risks the choice among candidates weighs (the default knob and the next step up).
CHOICE_RISKS = (0.01, 0.02)
#: Whether the shipped rules answer by the second opinion's lead (its run knob's default).
SECOND_OPINION_BY_DEFAULT = RunConfig().second_opinion
#: Candidate feature sets, judged leave-one-KB-out; the first is today's rules' own evidence.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "rules-inputs": ("margin", "lead", "mpnet_gap", "mpnet_asked"),
    "+coverage": ("margin", "lead", "mpnet_gap", "mpnet_asked", "coverage"),
    "+coverage+twins": ("margin", "lead", "mpnet_gap", "mpnet_asked", "coverage", "twins"),
    "all": tuple(f for f in FEATURES if not f.startswith("rules_")),
    "rules+margin+lead+mpnet": ("rules_verbatim", "rules_second", "margin", "lead", "mpnet_gap"),
    "rules+all": FEATURES,
}


def kbs(heldout: bool) -> dict[str, dict[str, Any]]:
    """name -> KB files and golden file (public sets are converted in collect)."""
    found: dict[str, dict[str, Any]] = {
        name: {
            "files": [REPO / "datasets" / name / "faq.jsonl"],
            "golden": REPO / "datasets" / name / "golden.jsonl",
        }
        for name in ("ewallet", "telco", "gym", "courier")
    }
    tngd = SHARED / "seeds" / "tngd-faq"
    found["tngd"] = {"files": [tngd / "sample.json"], "golden": tngd / "golden_set.jsonl"}
    for name in PUBLIC:
        found[name.split("-")[0]] = {
            "files": [SHARED / "faq" / name / "kb.jsonl"],
            "queries": SHARED / "faq" / name / "queries.jsonl",
            "sample": SAMPLE if name.startswith("dstc11") else None,
        }
    if heldout:
        covid = SHARED / "faq" / "covidfaq"
        return {"covid": {"files": [covid / "kb.jsonl"], "queries": covid / "queries.jsonl"}}
    return found


def golden_rows(queries: Path, sample: int | None) -> list[dict[str, Any]]:
    """A public FAQ set's queries in our golden format (gold ids: answer; none: refuse)."""
    rows = [json.loads(line) for line in queries.read_text(encoding="utf-8").splitlines() if line]
    if sample and len(rows) > sample:
        rows = random.Random(SEED).sample(rows, sample)
    return [
        {
            "id": r["id"],
            "question": r["question"],
            "expected": "answer" if r.get("gold_ids") else "refuse",
            "expected_source_ids": list(r.get("gold_ids") or []),
        }
        for r in rows
    ]


def collect(name: str, spec: dict[str, Any], out: Path) -> None:
    """Ask every case of one KB in a scratch data dir (run in a child process) and write its
    rows to `out`."""
    data_dir = tempfile.mkdtemp(prefix=f"decision-{name}-")
    os.environ["GUARDRAG_DATA_DIR"] = data_dir
    os.environ.setdefault("GUARDRAG_LLM_LOCAL", "false")  # no chat model: none is needed
    # the second opinion's weights (all-mpnet-base-v2), from the usual data dir's models
    os.environ.setdefault("GUARDRAG_LLM_MODEL_DIR", str(MODELS))
    from langgraph.runtime import Runtime  # lazy: the data dir is set first

    from guardrag.config.settings import load_settings  # lazy: the data dir is set first
    from guardrag.faces.eval import calibration  # lazy: the data dir is set first
    from guardrag.faces.service import Guardrag  # lazy: the data dir is set first

    golden = spec.get("golden")
    if golden is None:
        golden = Path(data_dir) / "golden.jsonl"
        rows = golden_rows(spec["queries"], spec.get("sample"))
        golden.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bot = Guardrag.from_settings(load_settings(), audit=False, source="eval")
    try:
        asked, run = _asked(bot, name, spec["files"], golden)
        # the rules' columns as calibration replays them; the second opinion is asked in
        # _record, once per case, for both the rules' column and the features
        quiet = run.model_copy(update={"second_opinion": False})
        feat = calibration.features(asked, bot.services, (0.0,), name, quiet)
        runtime = Runtime(context=bot.services)
        with out.open("w", encoding="utf-8") as handle:
            for i, row in enumerate(asked):
                handle.write(json.dumps(_record(name, row, feat, i, run, runtime)) + "\n")
    finally:
        bot.close()
        shutil.rmtree(data_dir, ignore_errors=True)  # the scratch KB, not the cached rows


def _asked(bot: Any, name: str, files: list[Path], golden: Path) -> tuple[list[Any], Any]:
    """The KB ingested and every English case asked with the collection knobs (no model); the
    run's effective knobs (the KB's calibrated verbatim threshold)."""
    from guardrag.core.kb.calibration import Calibration  # lazy: in the child process
    from guardrag.core.kb.ingest import ingest  # lazy: in the child process
    from guardrag.faces.eval import calibration  # lazy: in the child process
    from guardrag.faces.eval.evaluate import load_cases, resolve_gold, run_case  # lazy: child
    from guardrag.faces.eval.report import effective_knobs  # lazy: in the child process

    store = bot.services.store
    print(ingest(store, bot.services.embedder, name, files).summary(), flush=True)
    info = store.kb_info(name)
    assert info is not None
    # the second opinion asked whatever its knob's default: the features hold its view
    asking = RunConfig.checked({"use_llm": False, "second_opinion": True})
    run = effective_knobs(asking, Calibration.from_extra(info.extra))
    titles = {
        str(p.payload.get("source_id")): str(p.payload.get("title", "")) for p in store.points(name)
    }
    knobs = {"use_llm": False, **calibration.COLLECT_KNOBS}
    cases = load_cases(golden, "en")
    asked = []
    for i, case in enumerate(cases):
        asked.append(run_case(bot, case, name, resolve_gold(case, titles), knobs))
        if i % 100 == 0:
            print(f"{name}: {i}/{len(cases)}", flush=True)
    return asked, run


def _record(name: str, row: Any, feat: Any, i: int, run: Any, runtime: Any) -> dict[str, Any]:
    """One case's row: the rules' inputs (calibration's columns) and, for a one-part question
    without history whose top entry is an FAQ entry, the features the learned decision reads."""
    import _decision as decision  # lazy: in the child process

    from guardrag.core.rerank import answers_in_kind  # lazy: in the child process
    from guardrag.faces.eval import calibration  # lazy: in the child process
    from guardrag.nodes.rerank import ask_second_opinion  # lazy: in the child process

    several = any(d.node == "rerank" and "parts" in d.detail for d in row.result.trail)
    ranked = list(row.trace.ranked)
    top = ranked[0] if ranked else None
    threshold = float(run.faq_answer_threshold or 0.0)
    record: dict[str, Any] = {
        "kb": name,
        "id": row.case.id,
        "expect": row.case.expect,
        "threshold": threshold,
        "domain_min_similarity": run.domain_min_similarity,
        "min_relevance": run.min_relevance,
        "faq_margin": run.faq_margin,
        "several": several,
        "history": bool(row.case.history),
        "in_kind": bool(top is not None and answers_in_kind(row.case.question, top.payload)),
        "kb_similarity": float(feat.kb_similarity[i]),
        "best": float(feat.best[i]),
        "rule_lead": float(feat.lead[i]),
        "second_lead": -1.0,  # set below when the second opinion ranks it first
        **{flag: bool(getattr(feat, flag)[i]) for flag in calibration.FLAGS},
    }
    if top is None or not top.is_faq or several or row.case.history:
        return record
    question = row.case.question
    opinion = ask_second_opinion(question, name, ranked, run, runtime, {})
    stats = runtime.context.kb_stats.peek(name)
    record["features"] = decision.observe(
        question, ranked, threshold, opinion, stats, run.faq_margin
    )
    if opinion is not None and opinion.agrees(top.citation().source_id, -1.0):
        record["second_lead"] = opinion.lead  # as calibration.features has it
    return record


def load_rows(cache: Path, names: Sequence[str]) -> list[dict[str, Any]]:
    """The cached rows, with the rules' verdicts among the features (at the row's faq_margin)."""
    rows = []
    for name in names:
        rows += [json.loads(line) for line in (cache / f"{name}.jsonl").read_text().splitlines()]
    for r in rows:
        if "features" in r:
            r["features"].update(rules_verdicts(r["features"], r["faq_margin"]))
    return rows


# --- the decision, replayed -------------------------------------------------------------------


def scope(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases the decision is about: judged, one part, no history (several-part questions
    and follow-ups keep today's rules in either mode)."""
    return [r for r in rows if r["judged"] and not r["several"] and not r["history"]]


def reaches(r: dict[str, Any]) -> bool:
    """A case whose top FAQ entry is decided on: past the domain gate and min_relevance (at the
    default knobs), answering in kind."""
    return bool(
        r["ranked"]
        and not r["pre_refused"]
        and r["kb_similarity"] >= r["domain_min_similarity"]
        and r["best"] >= r["min_relevance"]
        and r["top_faq"]
        and r["in_kind"]
        and "features" in r
    )


def rules_answer(r: dict[str, Any]) -> bool:
    """Today's rules at their defaults: at or above the threshold, ahead by faq_margin over
    rivals in the fused ranking, or in the second opinion's when its knob is on by default
    (`verbatim.answers_verbatim`)."""
    second = r["second_lead"] if SECOND_OPINION_BY_DEFAULT else verbatim.NOT_ASKED
    return bool(
        verbatim.answers_verbatim(
            True, r["best"], r["rule_lead"], r["threshold"], r["faq_margin"], second
        )
    )


def rates(rows: Sequence[dict[str, Any]], answer: Sequence[bool]) -> tuple[float, float]:
    """(answered right, answered wrong) as shares of the cases in scope; an exact match counts
    as it was answered (the same in either mode)."""
    right = wrong = 0
    for r, a in zip(rows, answer, strict=True):
        if r["exact"]:
            right += r["exact_ok"]
            wrong += not r["exact_ok"]
        elif a:
            right += r["top_ok"]
            wrong += not r["top_ok"]
    n = max(len(rows), 1)
    return right / n, wrong / n


# --- the model -----------------------------------------------------------------------------


def matrix(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> np.ndarray:
    return np.array([[r["features"][f] for f in names] for r in rows], dtype=float)


def fit(x: np.ndarray, y: np.ndarray, l2: float = L2) -> dict[str, Any]:
    """L2 logistic regression on standardised columns (Newton's method; no penalty on the
    intercept)."""
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-z @ w))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"mean": mean, "scale": scale, "intercept": float(w[0]), "coef": w[1:]}


def predict(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    z = model["intercept"] + ((x - model["mean"]) / model["scale"]) @ model["coef"]
    return 1 / (1 + np.exp(-z))


def risk_curve(p: np.ndarray, y: np.ndarray, points: int = 200) -> list[tuple[float, float]]:
    """(cut-off, share wrong among the rows at or above it), at up to `points` cut-offs taken
    from the predictions' own values."""
    order = np.argsort(-p)
    ps, ys = p[order], y[order]
    wrong = np.cumsum(1 - ys) / np.arange(1, len(ys) + 1)
    picks = np.unique(np.linspace(0, len(ps) - 1, min(points, len(ps))).astype(int))
    # the last row of a run of equal probabilities counts them all
    curve = {}
    for i in picks:
        j = int(np.searchsorted(-ps, -ps[i], side="right")) - 1
        curve[round(float(ps[i]), 6)] = round(float(wrong[j]), 6)
    return sorted(curve.items())


def oof(rows_by_kb: dict[str, list[dict[str, Any]]], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Each KB's predictions by a model fitted on the other KBs."""
    out = {}
    for kb, rows in rows_by_kb.items():
        train = [r for other, rs in rows_by_kb.items() if other != kb for r in rs]
        model = fit(matrix(train, names), np.array([r["top_ok"] for r in train], dtype=float))
        out[kb] = predict(model, matrix(rows, names)) if rows else np.zeros(0)
    return out


def decided(rows_by_kb: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {kb: [r for r in rows if reaches(r)] for kb, rows in rows_by_kb.items()}


def loko(
    scoped: dict[str, list[dict[str, Any]]], names: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per KB left out: rules and learned (at each risk) answered-right / -wrong rates."""
    table: dict[str, dict[str, Any]] = {}
    rows_d = decided(scoped)
    for kb, rows in scoped.items():
        others = {k: v for k, v in rows_d.items() if k != kb}
        inner = oof(others, names)
        p_in = np.concatenate([inner[k] for k in others])
        y_in = np.array([r["top_ok"] for k in others for r in others[k]], dtype=float)
        curve = risk_curve(p_in, y_in)
        train = [r for k in others for r in others[k]]
        model = fit(matrix(train, names), np.array([r["top_ok"] for r in train], dtype=float))
        p = {id(r): float(predict(model, matrix([r], names))[0]) for r in rows_d[kb]}
        entry: dict[str, Any] = {
            "cases": len(rows),
            "decided": len(rows_d[kb]),
            "rules": rates(rows, [reaches(r) and rules_answer(r) for r in rows]),
        }
        for risk in RISKS:
            cut = cutoff(curve, risk)
            answer = [reaches(r) and p[id(r)] >= cut for r in rows]
            entry[f"learned@{risk:g}"] = rates(rows, answer)
            entry[f"cutoff@{risk:g}"] = cut
        table[kb] = entry
    return table


def summary_line(table: dict[str, dict[str, Any]], key: str) -> tuple[float, float]:
    right = float(np.mean([e[key][0] for e in table.values()]))
    wrong = float(np.mean([e[key][1] for e in table.values()]))
    return right, wrong


def render_table(table: dict[str, dict[str, Any]]) -> list[str]:
    head = "| KB left out | cases | decided | rules right / wrong |"
    head += "".join(f" learned @{r:.0%} right / wrong (cut-off) |" for r in RISKS)
    lines = [head, "|" + " --- |" * (3 + len(RISKS) + 0) + " --- |"]
    for kb, e in [*table.items(), ("macro mean", None)]:
        if e is None:
            cells = [kb, "", "", _pair(summary_line(table, "rules"))]
            cells += [_pair(summary_line(table, f"learned@{r:g}")) for r in RISKS]
        else:
            cells = [kb, str(e["cases"]), str(e["decided"]), _pair(e["rules"])]
            cells += [f"{_pair(e[f'learned@{r:g}'])} ({e[f'cutoff@{r:g}']:.3f})" for r in RISKS]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _pair(pair: tuple[float, float]) -> str:
    return f"{pair[0]:.1%} / {pair[1]:.1%}"


def objective(table: dict[str, dict[str, Any]]) -> float:
    """The choice among candidates: macro mean over the KBs left out of right - 5 x wrong,
    summed over CHOICE_RISKS (ties: the first candidate, the fewest features)."""
    total = 0.0
    for risk in CHOICE_RISKS:
        right, wrong = summary_line(table, f"learned@{risk:g}")
        total += right - 5 * wrong
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "fit-decision")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--heldout", choices=["covid"], help="score the held-out set (only)")
    parser.add_argument("--collect", help=argparse.SUPPRESS)  # the child process, one KB
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    specs = kbs(bool(args.heldout))
    if args.collect:
        collect(args.collect, specs[args.collect], args.cache / f"{args.collect}.jsonl")
        return
    for name in specs:
        if not (args.cache / f"{name}.jsonl").exists():
            print(f"collecting {name}...", flush=True)
            command = [sys.executable, __file__, "--cache", str(args.cache), "--collect", name]
            subprocess.run(command + (["--heldout", "covid"] if args.heldout else []), check=True)
    if args.heldout:
        heldout(args.cache, specs)
        return
    scoped = {name: scope(load_rows(args.cache, [name])) for name in specs}
    results = {}
    for label, names in CANDIDATES.items():
        table = loko(scoped, names)
        results[label] = table
        print(f"\n## {label}: {', '.join(names)} (objective {objective(table):.4f})")
        print("\n".join(render_table(table)))
    chosen = max(CANDIDATES, key=lambda label: objective(results[label]))
    names = CANDIDATES[chosen]
    print(f"\nchosen: {chosen}")
    rows_d = decided(scoped)
    train = [r for rows in rows_d.values() for r in rows]
    y = np.array([r["top_ok"] for r in train], dtype=float)
    model = fit(matrix(train, names), y)
    pooled = oof(rows_d, names)
    curve = risk_curve(np.concatenate([pooled[k] for k in rows_d]), y)
    data = {
        "features": list(names),
        "mean": [round(float(v), 6) for v in model["mean"]],
        "scale": [round(float(v), 6) for v in model["scale"]],
        "coef": [round(float(v), 6) for v in model["coef"]],
        "intercept": round(model["intercept"], 6),
        "risk_curve": curve,
        "meta": {
            "fitted_on": {k: len(v) for k, v in rows_d.items()},
            "rows": len(train),
            "positives": int(y.sum()),
            "l2": L2,
            "chosen_from": {k: list(v) for k, v in CANDIDATES.items()},
            "cutoff@0.01": cutoff(curve, 0.01),
            "cutoff@0.02": cutoff(curve, 0.02),
            "refit": "python scripts/fit_decision.py",
        },
    }
    print(json.dumps({k: v for k, v in data.items() if k != "risk_curve"}, indent=1))
    if not args.dry_run:
        MODEL_PATH.parent.mkdir(parents=True, exist_ok=True)
        MODEL_PATH.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_PATH}")


def heldout(cache: Path, specs: dict[str, Any]) -> None:
    """The shipped model and today's rules on the held-out set (no fitting, no choosing)."""
    from _decision import shipped  # lazy: the model written by this script

    model = shipped()
    for name in specs:
        rows = scope(load_rows(cache, [name]))
        print(f"{name}: {len(rows)} cases in scope, {sum(map(reaches, rows))} decided")
        print(
            f"  rules: right / wrong {_pair(rates(rows, [reaches(r) and rules_answer(r) for r in rows]))}"
        )
        for risk in (0.005, *RISKS, 0.05):
            cut = model.cutoff(risk)
            answer = [reaches(r) and model.probability(r["features"]) >= cut for r in rows]
            print(
                f"  learned @{risk:g} (cut-off {cut:.3f}): right / wrong {_pair(rates(rows, answer))}"
            )


if __name__ == "__main__":
    main()
