"""`guardrag eval`: run a golden set through the pipeline and write a report (or calibrate)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from tqdm import tqdm

from guardrag.config.run_config import (
    KnobError,
    RunConfig,
)
from guardrag.config.settings import load_settings, validate_kb_name
from guardrag.faces.startup import resume


def knob_overrides(items: list[str]) -> dict[str, Any]:
    """`--knob name=value` options as knobs; a bad one is the option's error, not a traceback."""
    try:
        return RunConfig.parse(items)
    except KnobError as exc:
        raise typer.BadParameter(str(exc), param_hint="--knob") from None


GoldenArg = Annotated[
    Path,
    typer.Argument(
        metavar="GOLDEN.jsonl",
        help="Golden set: ours, TNGD, GuidelineIQ, XSTest or Giskard rows (detected per row).",
    ),
]
KbOpt = Annotated[str, typer.Option("--kb", help="Knowledge base to ask.")]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Report folder (default eval/<kb>-<golden name>)."),
]
IngestOpt = Annotated[
    list[Path] | None,
    typer.Option("--ingest", help="Ingest these files into the KB first (idempotent)."),
]
DescriptionOpt = Annotated[str | None, typer.Option(help="KB description, with --ingest.")]
LangOpt = Annotated[str, typer.Option(help="Only cases in this language; 'all' for every.")]
LimitOpt = Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")]
KnobOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--knob",
        help="Per-run knob override, e.g. --knob min_relevance=0.4 (`guardrag knobs` lists them).",
    ),
]
CompareOpt = Annotated[
    Path | None,
    typer.Option(
        "--compare", metavar="OLD.json", help="An earlier summary.json: flag regressions."
    ),
]
CalibrateOpt = Annotated[
    bool, typer.Option("--calibrate", help="Sweep the thresholds and propose values.")
]
WriteOpt = Annotated[
    bool,
    typer.Option(
        "--write",
        help="With --calibrate: keep the proposed verbatim-answer threshold with the KB "
        "(replacing its self-calibration until the next ingest).",
    ),
]
PenaltyOpt = Annotated[
    float, typer.Option(min=0.0, help="With --calibrate: cost of a wrong answer.")
]
Bm25Opt = Annotated[float | None, typer.Option(help="BM25 baseline's answer threshold.")]
DenseOpt = Annotated[float | None, typer.Option(help="Dense baseline's answer threshold.")]


def eval_command(
    golden: GoldenArg,
    kb: KbOpt,
    out: OutOpt = None,
    ingest: IngestOpt = None,
    description: DescriptionOpt = None,
    lang: LangOpt = "en",
    limit: LimitOpt = None,
    knob: KnobOpt = None,
    compare: CompareOpt = None,
    calibrate: CalibrateOpt = False,
    write: WriteOpt = False,
    penalty: PenaltyOpt = 5.0,
    bm25_threshold: Bm25Opt = None,
    dense_threshold: DenseOpt = None,
) -> None:
    """Score a golden set: decisions, refusal reasons, citations, retrieval against BM25 and dense
    baselines, grounding, false blocks, latency, tokens. Writes report.md, summary.json, cases.jsonl
    and plots; exits 1 when --compare finds a regression."""
    # lazy: the pipeline, plots and reports load only when `eval` runs
    from guardrag.core.kb.calibration import Calibration
    from guardrag.faces.eval import calibration  # lazy: see above
    from guardrag.faces.eval import metrics as eval_metrics  # lazy: see above
    from guardrag.faces.eval import report as eval_report  # lazy: see above
    from guardrag.faces.service import Guardrag  # lazy: see above

    name, cases = _golden_cases(golden, kb, lang, limit)
    knobs = knob_overrides(knob or [])
    old = eval_metrics.load_summary(compare) if compare else None
    out_dir = out or Path("eval") / f"{name}-{golden.stem}"
    settings = load_settings()
    bot = Guardrag.from_settings(settings, audit=False, source="eval")
    resume()
    try:
        kb_info = _knowledge_base(bot, name, ingest, description)
        kb_calibration = Calibration.from_extra(kb_info.extra)
        effective = eval_report.effective_knobs(RunConfig.checked(knobs), kb_calibration)
        points = list(bot.services.store.points(name))  # read once: gold titles, near-duplicates
        model = _model(bot, settings.llm_base_url)
        run_knobs = {**knobs, **calibration.COLLECT_KNOBS} if calibrate else knobs
        rows = _asked(bot, cases, name, points, run_knobs)
        if calibrate:
            result = _calibrate(bot, rows, name, effective, penalty, out_dir, golden, model)
            if write:
                store, scorer = bot.services.store, bot.services.reranker.name
                typer.echo(
                    _write_threshold(store, name, kb_info.snapshot_id, result, golden, scorer)
                )
            return
        near_gold = eval_metrics.near_duplicates(rows, points)
        top_k = effective.top_k
        rankings = _rankings(bot, rows, name, top_k)
    finally:
        bot.close()
    info = eval_metrics.RunInfo(
        golden=str(golden),
        kb=name,
        model=model,
        reranker=bot.services.reranker.name,
        knobs=knobs,
        top_k=top_k,
        lang=lang,
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        calibration=kb_calibration.to_dict() if kb_calibration else None,
    )
    thresholds = _baseline_thresholds(bm25_threshold, dense_threshold)
    summary = eval_metrics.summarise(rows, rankings, info, thresholds, near_gold)
    regressions = eval_metrics.compare(old, summary) if old is not None else None
    _report(summary, rows, out_dir, eval_report.marked_thresholds(effective), regressions)


def _golden_cases(golden: Path, kb: str, lang: str, limit: int | None) -> tuple[str, list[Any]]:
    """The KB's checked name and the golden cases to ask (bad ones are the caller's error)."""
    from guardrag.faces.eval.evaluate import GoldenError, load_cases  # lazy: with `eval`

    try:
        name = validate_kb_name(kb)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kb") from None
    try:
        cases = load_cases(golden, None if lang == "all" else lang)[:limit]
    except GoldenError as exc:
        raise typer.BadParameter(str(exc), param_hint="GOLDEN.jsonl") from None
    if not cases:
        raise typer.BadParameter(f"{golden}: no cases (lang {lang!r})", param_hint="GOLDEN.jsonl")
    return name, cases


def _knowledge_base(bot: Any, name: str, ingest: list[Path] | None, description: str | None) -> Any:
    """The KB to ask (ingested first with --ingest); a KB that does not exist is the caller's
    error."""
    store = bot.services.store
    if ingest:
        from guardrag.core.kb.ingest import ingest as run_ingest  # lazy: only with --ingest

        typer.echo(
            run_ingest(
                store, bot.services.embedder, name, ingest, description=description
            ).summary()
        )
    if (kb_info := store.kb_info(name)) is None:
        raise typer.BadParameter(
            f"knowledge base {name!r} not found; create it with `guardrag ingest` or --ingest",
            param_hint="--kb",
        )
    return kb_info


def _asked(
    bot: Any, cases: list[Any], name: str, points: list[Any], knobs: dict[str, Any]
) -> list[Any]:
    """Every case asked through the pipeline, with its gold entries resolved by title."""
    from guardrag.faces.eval.evaluate import resolve_gold, run_case  # lazy: with `eval`

    titles = {str(p.payload.get("source_id")): str(p.payload.get("title", "")) for p in points}
    return [
        run_case(bot, case, name, resolve_gold(case, titles), knobs)
        for case in tqdm(cases, desc="eval", unit="case", file=sys.stderr)
    ]


def _calibrate(
    bot: Any,
    rows: list[Any],
    name: str,
    effective: RunConfig,
    penalty: float,
    out_dir: Path,
    golden: Path,
    model: str,
) -> Any:
    """The thresholds swept over the asked cases, the proposal written and shown."""
    from guardrag.faces.eval import calibration  # lazy: with `eval --calibrate`

    feat = calibration.features(
        rows, bot.services, calibration.GRID["grounding_min_similarity"], name, effective
    )
    result = calibration.sweep(feat, penalty, effective)
    report = calibration.write(result, out_dir, str(golden), model)
    typer.echo(f"proposed: {json.dumps(result.proposed)}")
    typer.echo(f"current:  {json.dumps(result.current)}")
    typer.echo(f"wrote {report}")
    return result


def _rankings(bot: Any, rows: list[Any], name: str, top_k: int) -> dict[str, Any]:
    """The retrieval ranking of every case that expects an answer or a refusal."""
    from guardrag.faces.eval.evaluate import rank  # lazy: with `eval`

    return {
        r.case.id: rank(bot.services, name, r.case.question, top_k)
        for r in rows
        if r.case.expect in ("answer", "refuse")
    }


def _baseline_thresholds(bm25: float | None, dense: float | None) -> dict[str, float]:
    """The BM25 and dense baselines' answer thresholds, the defaults unless given."""
    from guardrag.faces.eval import metrics as eval_metrics  # lazy: with `eval`

    thresholds = dict(eval_metrics.BASELINE_THRESHOLDS)
    if bm25 is not None:
        thresholds["bm25"] = bm25
    if dense is not None:
        thresholds["dense"] = dense
    return thresholds


def _report(
    summary: dict[str, Any],
    rows: list[Any],
    out_dir: Path,
    marked: Any,
    regressions: list[str] | None,
) -> None:
    """The report written and its headline figures shown; exit 1 on a regression."""
    from guardrag.faces.eval import report as eval_report  # lazy: with `eval`

    report = eval_report.write_report(summary, rows, out_dir, marked, regressions)
    for key, value in summary["metrics"].items():
        typer.echo(f"{key:<24} {value}")
    for system, values in summary["retrieval"].items():
        typer.echo(f"{system:<24} " + "  ".join(f"{k} {v}" for k, v in values.items()))
    typer.echo(f"wrote {report}")
    if regressions:
        for line in regressions:
            typer.secho(f"regression: {line}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=1)


def _model(bot: Any, base_url: str | None) -> str:
    if bot.services.chat_model is None:
        return "none (no LLM: questions that need generation are refused llm_unavailable)"
    where = base_url or "local llama.cpp server"
    return f"{bot.services.model_name} ({where})"


def _write_threshold(
    store: Any, kb: str, snapshot: str, result: Any, golden: Path, scorer: str
) -> str:
    """Keep the golden set's verbatim threshold with the KB (it replaces the self-calibration
    until the next ingest recalibrates)."""
    from guardrag.core.kb.calibration import KEY, Calibration  # lazy: with `eval`

    proposed = float(result.proposed["knobs"]["faq_answer_threshold"])
    found = Calibration(
        faq_answer_threshold=proposed,
        probes=int(result.cases),
        scorer=scorer,
        method=f"golden set {golden.name}",
    )
    if not store.annotate(kb, snapshot, {KEY: found.to_dict()}):
        return f"not written: knowledge base {kb!r} was re-ingested meanwhile"
    return f"wrote faq_answer_threshold {proposed} into knowledge base {kb!r}"
