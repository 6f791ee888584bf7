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


def _knobs(items: list[str]) -> dict[str, Any]:
    try:
        return RunConfig.parse(items)
    except KnobError as exc:
        raise typer.BadParameter(str(exc), param_hint="--knob") from None


def eval_command(
    golden: Annotated[
        Path,
        typer.Argument(
            metavar="GOLDEN.jsonl",
            help="Golden set: ours, TNGD, GuidelineIQ, XSTest or Giskard rows (detected per row).",
        ),
    ],
    kb: Annotated[str, typer.Option("--kb", help="Knowledge base to ask.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Report folder (default eval/<kb>-<golden name>)."),
    ] = None,
    ingest: Annotated[
        list[Path] | None,
        typer.Option("--ingest", help="Ingest these files into the KB first (idempotent)."),
    ] = None,
    description: Annotated[str | None, typer.Option(help="KB description, with --ingest.")] = None,
    lang: Annotated[str, typer.Option(help="Only cases in this language; 'all' for every.")] = "en",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N cases.")] = None,
    knob: Annotated[
        list[str] | None,
        typer.Option("--knob", help="Per-run knob override, e.g. --knob min_relevance=0.4."),
    ] = None,
    compare: Annotated[
        Path | None,
        typer.Option(
            "--compare", metavar="OLD.json", help="An earlier summary.json: flag regressions."
        ),
    ] = None,
    calibrate: Annotated[
        bool, typer.Option("--calibrate", help="Sweep the thresholds and propose values.")
    ] = False,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="With --calibrate: keep the proposed verbatim-answer threshold with the KB "
            "(replacing its self-calibration until the next ingest).",
        ),
    ] = False,
    penalty: Annotated[
        float, typer.Option(min=0.0, help="With --calibrate: cost of a wrong answer.")
    ] = 5.0,
    bm25_threshold: Annotated[
        float | None, typer.Option(help="BM25 baseline's answer threshold.")
    ] = None,
    dense_threshold: Annotated[
        float | None, typer.Option(help="Dense baseline's answer threshold.")
    ] = None,
) -> None:
    """Score a golden set: decisions, refusal reasons, citations, retrieval against BM25 and dense
    baselines, grounding, false blocks, latency, tokens. Writes report.md, summary.json, cases.jsonl
    and plots; exits 1 when --compare finds a regression."""
    # lazy: the pipeline, plots and reports load only when `eval` runs
    from guardrag.core.kb.calibration import Calibration
    from guardrag.faces.eval import calibration  # lazy: see above
    from guardrag.faces.eval import metrics as eval_metrics  # lazy: see above
    from guardrag.faces.eval import report as eval_report  # lazy: see above
    from guardrag.faces.eval.evaluate import (  # lazy: see above
        GoldenError,
        load_cases,
        rank,
        resolve_gold,
        run_case,
    )
    from guardrag.faces.service import Guardrag  # lazy: see above

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
    knobs = _knobs(knob or [])
    old = eval_metrics.load_summary(compare) if compare else None
    out_dir = out or Path("eval") / f"{name}-{golden.stem}"
    settings = load_settings()
    bot = Guardrag.from_settings(settings, audit=False, source="eval")
    resume()
    try:
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
        kb_calibration = Calibration.from_extra(kb_info.extra)
        effective = eval_report.effective_knobs(RunConfig.checked(knobs), kb_calibration)
        points = list(store.points(name))  # read once: gold titles, then near-duplicates
        titles = {str(p.payload.get("source_id")): str(p.payload.get("title", "")) for p in points}
        model = _model(bot, settings.llm_base_url)
        run_knobs = {**knobs, **calibration.COLLECT_KNOBS} if calibrate else knobs
        rows = [
            run_case(bot, case, name, resolve_gold(case, titles), run_knobs)
            for case in tqdm(cases, desc="eval", unit="case", file=sys.stderr)
        ]
        if calibrate:
            feat = calibration.features(
                rows, bot.services, calibration.GRID["grounding_min_similarity"], name, effective
            )
            result = calibration.sweep(feat, penalty, effective)
            report = calibration.write(result, out_dir, str(golden), model)
            typer.echo(f"proposed: {json.dumps(result.proposed)}")
            typer.echo(f"current:  {json.dumps(result.current)}")
            typer.echo(f"wrote {report}")
            if write:
                typer.echo(
                    _write_threshold(
                        store, name, kb_info.snapshot_id, result, golden, bot.services.reranker.name
                    )
                )
            return
        near_gold = eval_metrics.near_duplicates(rows, points)
        top_k = effective.top_k
        rankings = {
            r.case.id: rank(bot.services, name, r.case.question, top_k)
            for r in rows
            if r.case.expect in ("answer", "refuse")
        }
    finally:
        bot.close()
    thresholds = dict(eval_metrics.BASELINE_THRESHOLDS)
    if bm25_threshold is not None:
        thresholds["bm25"] = bm25_threshold
    if dense_threshold is not None:
        thresholds["dense"] = dense_threshold
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
    summary = eval_metrics.summarise(rows, rankings, info, thresholds, near_gold)
    regressions = eval_metrics.compare(old, summary) if old is not None else None
    report = eval_report.write_report(
        summary, rows, out_dir, eval_report.marked_thresholds(effective), regressions
    )
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
