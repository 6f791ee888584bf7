"""The `guardrag` command: ingest, ask, batch, graph, kbs (and audit, eval, llm, serve).

A short command pays only for what it uses: this module imports Typer and the settings; each
command imports the pipeline, the embedder, the web server or the UI when it runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from guardrag.config.settings import describe_settings, load_settings, validate_kb_name
from guardrag.contract import GuardragError, Result
from guardrag.core.audit.logs import configure_json_logging
from guardrag.core.jsonl import read_objects
from guardrag.faces.cli.audit import audit_app
from guardrag.faces.cli.eval import KnobOpt, eval_command, knob_overrides
from guardrag.faces.cli.llm import keep_local_model, llm_app
from guardrag.faces.cli.quarantine import quarantine_app
from guardrag.faces.cli.serve import serve
from guardrag.faces.startup import pause, resume

_ENV_HELP = "\n\n".join(f"{name}: {text}" for name, text in describe_settings())
app = typer.Typer(
    help="Answers questions only from a verified knowledge base.\n\nSettings (environment or .env):\n\n"
    + _ENV_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: Rich costs a tenth of a second to import
)
KbOption = Annotated[
    str | None, typer.Option("--kb", help="Knowledge base name (default GUARDRAG_DEFAULT_KB).")
]


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=2)


def _kb(name: str | None) -> str:
    """The KB named by --kb, or the default one when --kb is not given (an empty --kb is an
    error: it must never quietly mean the default KB and mix another KB's rows into it)."""
    try:
        return validate_kb_name(load_settings().default_kb if name is None else name, "--kb")
    except ValueError as exc:
        raise _fail(str(exc)) from None


def _cause(result: Result) -> str:
    """What actually failed behind a refusal of kind `error` (the trail says; the customer
    message only says "temporarily unavailable")."""
    for decision in reversed(result.trail):
        if decision.verdict == "error":
            detail = decision.detail.get("error") or decision.detail.get("cause")
            return f"{decision.node}: {detail or decision.reason}"
    refusal = result.refusal
    return f"{refusal.stage}: {refusal.reason.value}" if refusal else "unknown"


@app.command()
def ingest(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="FAQ files (.json, .jsonl, .csv) or documents (.pdf, .html, .docx, .md, .txt, .jsonl with text)."
        ),
    ],
    kb: KbOption = None,
    description: Annotated[
        str | None, typer.Option(help="What the KB is about, e.g. 'Kinetic Wallet'.")
    ] = None,
    fallback_url: Annotated[
        str | None, typer.Option(help="Help-centre URL shown when nothing fits.")
    ] = None,
    columns: Annotated[
        str | None, typer.Option(help="Column names, e.g. question=Q,answer=A,id=ref.")
    ] = None,
    skip_bad_rows: Annotated[
        bool, typer.Option(help="Report and skip malformed rows instead of stopping.")
    ] = False,
    allowed_domains: Annotated[
        str | None,
        typer.Option(help="Link domains answers may show (default: url fields, fallback)."),
    ] = None,
) -> None:
    """Add or update a knowledge base from files (idempotent; removes rows deleted from a file)."""
    # lazy: the embedding model, the guards and the index load only for this command
    from tqdm import tqdm

    from guardrag.core.embedder import load_embedder  # lazy: see above
    from guardrag.core.kb.ingest import ingest_parsed, parse  # lazy: see above
    from guardrag.core.kb.readers import parse_columns  # lazy: see above
    from guardrag.core.store import store_from_settings  # lazy: see above

    name = _kb(kb)
    settings = load_settings()
    parsed = parse(paths, parse_columns(columns), skip_bad_rows)  # read once, before the model
    total = len(parsed.entries)
    embedder = load_embedder()
    store = store_from_settings(settings)
    resume()
    try:
        with tqdm(total=total, desc=f"ingest {name}", unit="entry", file=sys.stderr) as bar:
            report = ingest_parsed(
                store,
                embedder,
                name,
                parsed,
                description=description,
                fallback_url=fallback_url,
                progress=bar.update,
                allowed_domains=[allowed_domains] if allowed_domains else None,
            )
            bar.update(total - bar.n)
    finally:
        store.close()
    for problem in report.skipped:
        typer.secho(f"skipped: {problem}", fg=typer.colors.YELLOW, err=True)
    for entry in report.flagged:
        typer.secho(f"quarantined: {entry}", fg=typer.colors.YELLOW, err=True)
    for line in report.dropped:
        typer.secho(f"left out: {line}", fg=typer.colors.YELLOW, err=True)
    typer.echo(report.summary())


def _print_result(result: Result) -> None:
    if result.outcome == "answered":
        typer.echo(result.answer)
        for number, citation in enumerate(result.citations, start=1):
            typer.echo(
                f"  [{number}] {citation.label or citation.title} ({citation.source_id}) "
                f"{citation.url or ''}".rstrip()
            )
        typer.secho(
            f"  route: {result.route}  confidence: {result.confidence:.2f}  {result.latency_ms:.0f} ms",
            dim=True,
        )
    else:
        assert result.refusal is not None
        typer.echo(result.answer)
        r = result.refusal
        typer.secho(
            f"  refused: {r.reason.value} ({r.kind}) at {r.stage}  {result.latency_ms:.0f} ms",
            dim=True,
        )


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    kb: KbOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the full result object as JSON.")
    ] = False,
    thread: Annotated[
        str | None,
        typer.Option(help="Conversation id: follow-ups are understood from its earlier turns."),
    ] = None,
    keep_model: Annotated[
        bool,
        typer.Option(
            help="With the bundled model, leave a server this command had to start running "
            "for the next commands (`guardrag llm stop` stops it); --no-keep-model stops it "
            "on exit."
        ),
    ] = True,
    knob: KnobOpt = None,
) -> None:
    """Answer one question (or refuse it, with the reason).

    The chat model is GUARDRAG_LLM_BASE_URL's when set. Otherwise it is the bundled local
    model's server for this data dir: the one `guardrag llm start`, `make run` or `guardrag
    serve` runs, or, with none running, one started now and left running, so the next
    `ask` answers without loading the model again.
    """
    from guardrag.faces.service import Guardrag  # lazy: the pipeline loads only to answer
    from guardrag.faces.threads import validate_thread_id  # lazy: with the pipeline

    thread_id = None if thread is None else validate_thread_id(thread)
    knobs = knob_overrides(knob or [])
    name = _kb(kb)  # a bad argument fails here, before any model server is started
    if keep_model:
        keep_local_model(load_settings())
    bot = Guardrag.from_settings(source="cli")
    resume()
    try:
        result = bot.ask(question, name, thread_id=thread_id, knobs=knobs)
    finally:
        bot.close()
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        _print_result(result)
    if result.refusal is not None and result.refusal.kind == "error":
        # A failure, not a decision: say what failed and exit non-zero, so scripts notice.
        raise _fail(f"{result.refusal.reason.value}: {_cause(result)}")


def _read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line, row) pairs; a row that is not a usable object comes back as an error string."""
    for number, row in read_objects(path):
        question = row.get("question", row.get("query")) if isinstance(row, dict) else None
        if isinstance(row, str):
            yield number, row
        elif not isinstance(question, str):
            yield number, f"{path}:{number}: expected an object with a 'question' string"
        else:
            yield number, {"id": row.get("id", f"line-{number}"), "question": question}


@app.command()
def batch(
    input_path: Annotated[
        Path, typer.Argument(metavar="IN.jsonl", help='Rows {"id": ..., "question": ...}.')
    ],
    out: Annotated[Path, typer.Option("--out", help="Where to write one result object per row.")],
    kb: KbOption = None,
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Questions answered in parallel.")
    ] = 4,
    knob: KnobOpt = None,
) -> None:
    """Answer a JSONL file of questions; bad rows are reported and skipped, output keeps input order."""
    from tqdm import tqdm  # lazy: with the pipeline

    from guardrag.faces.service import Guardrag  # lazy: the pipeline loads only to answer

    knobs = knob_overrides(knob or [])
    if not input_path.is_file():
        raise _fail(f"{input_path}: no such file")
    rows, bad = [], []
    for _, row in _read_rows(input_path):
        if isinstance(row, str):
            bad.append(row)
        else:
            rows.append((str(row["id"]), str(row["question"])))
    for problem in bad:
        typer.secho(f"skipped: {problem}", fg=typer.colors.YELLOW, err=True)
    name = _kb(kb)
    bot = Guardrag.from_settings(source="batch")
    resume()
    counts = {"answered": 0, "choices": 0, "refused": 0}
    try:
        with (
            out.open("w", encoding="utf-8") as sink,
            tqdm(total=len(rows), desc="batch", unit="q", file=sys.stderr) as bar,
        ):
            for result in bot.ask_many(
                rows, name, concurrency=concurrency, knobs=knobs, on_done=bar.update
            ):
                sink.write(result.model_dump_json() + "\n")
                counts[result.outcome] += 1
    finally:
        bot.close()
    typer.echo(
        f"{len(rows)} questions: {counts['answered']} answered, {counts['choices']} offered "
        f"choices, {counts['refused']} refused; {len(bad)} bad rows skipped -> {out}"
    )


@app.command()
def graph(
    mermaid: Annotated[
        bool,
        typer.Option("--mermaid", help="Print the graph as Mermaid text (the default)."),
    ] = False,
    png: Annotated[
        Path | None,
        typer.Option("--png", help="Render the graph to a PNG file (offline, Graphviz)."),
    ] = None,
) -> None:
    """Show the pipeline graph: Mermaid text (paste it into any Mermaid viewer, or a Markdown
    file on GitHub), or a PNG drawn offline with --png."""
    from guardrag.graph.builder import build_graph  # lazy: LangGraph loads only to draw

    drawable = build_graph().get_graph()
    if png is not None:
        drawable.draw_png(str(png))
        typer.echo(f"wrote {png}")
    if mermaid or png is None:  # ASCII art would need grandalf: Mermaid needs nothing
        typer.echo(drawable.draw_mermaid())


@app.command()
def kbs() -> None:
    """List knowledge bases: entries, snapshot, last ingest, verbatim-answer threshold."""
    from guardrag.core.kb.calibration import Calibration  # lazy: with the index
    from guardrag.core.store import store_from_settings  # lazy: the index engine loads here

    settings = load_settings()
    store = store_from_settings(settings)
    try:
        for name in store.list_kbs():
            info = store.kb_info(name)
            if info:
                cal = Calibration.from_extra(info.extra)
                threshold = (
                    f"verbatim threshold {cal.faq_answer_threshold:.3f} ({cal.method})"
                    if cal
                    else "verbatim threshold default"
                )
                typer.echo(
                    f"{name}\t{info.count} entries\tsnapshot {info.snapshot_id}\t{info.updated_at}\t{threshold}\t{len(info.extra.get('quarantined', []))} quarantined\t{info.description}"
                )
    finally:
        store.close()


@app.command()
def knobs() -> None:
    """List the per-question knobs: this deployment's value (GUARDRAG_KNOBS, else the default)
    and what each does."""
    from guardrag.config.run_config import RunConfig  # lazy: pydantic model, no engine

    deployment = load_settings().knobs
    effective = RunConfig.checked(deployment)
    for name, info in RunConfig.model_fields.items():
        where = "GUARDRAG_KNOBS" if name in deployment else "default"
        value = json.dumps(getattr(effective, name))
        typer.echo(f"{name}\t{value}\t({where})\t{info.description or ''}")


app.add_typer(audit_app, name="audit")
app.add_typer(llm_app, name="llm")
app.add_typer(quarantine_app, name="quarantine")
app.command()(serve)
app.command("eval")(eval_command)


def main() -> None:
    """Console entry point: known failures become one clear line and exit code 2, never a traceback."""
    pause()
    try:
        if load_settings().log_json:
            configure_json_logging()
        app()
    except (GuardragError, OSError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
