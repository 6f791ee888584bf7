"""`guardrag audit`: read the audit log (tail, show, stats, export) and replay a request."""

from __future__ import annotations

import csv
import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from guardrag.config.settings import load_settings
from guardrag.core.audit.migrations import AuditSchemaError
from guardrag.core.audit.record import AuditRecord
from guardrag.core.audit.sink import default_audit_url
from guardrag.core.audit.store import AuditUnavailable, SqlAuditStore, open_audit_store
from guardrag.faces.startup import resume

audit_app = typer.Typer(
    help="Read the audit log: tail, show, stats, export; replay a recorded request.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: Rich costs a tenth of a second to import
)

KbFilter = Annotated[str | None, typer.Option("--kb", help="Only this knowledge base.")]
Since = Annotated[
    str | None, typer.Option(help="Only requests since this ISO date/time, or the last N days: 7d.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


#: What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: text starting like a formula gets a leading
    apostrophe (OWASP's advice); numbers and other values are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=2)


@contextmanager
def _store() -> Iterator[SqlAuditStore]:
    """The store the settings name; a missing log or an unusable store is one line, exit 2."""
    url = default_audit_url(load_settings())
    if "://" not in url or url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            raise _fail(f"no audit log at {path} yet (it is written as requests are answered)")
    try:
        store = open_audit_store(url)
    except (AuditSchemaError, AuditUnavailable, sqlite3.Error) as exc:
        raise _fail(f"audit store {url}: {exc}") from None
    try:
        yield store
    finally:
        store.close()


def _since(value: str | None) -> str | None:
    if value and value.endswith("d") and value[:-1].isdigit():
        start = datetime.now(UTC) - timedelta(days=int(value[:-1]))
        return start.isoformat(timespec="seconds").replace("+00:00", "Z")
    return value


def _line(record: AuditRecord) -> str:
    decision = record.route if record.outcome == "answered" else record.refusal_reason
    if record.refusal_stage:
        decision = f"{decision}@{record.refusal_stage}"
    question = record.question if len(record.question) <= 70 else record.question[:67] + "..."
    return (
        f"{record.ts}  {record.request_id[:8]}  {record.kb:<10} {record.outcome:<8} "
        f"{decision or '-':<32} {record.latency_ms:>8.1f} ms  {question}"
    )


@audit_app.command()
def tail(
    n: Annotated[int, typer.Option("-n", min=1, help="How many of the newest requests.")] = 20,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new requests as they arrive.")
    ] = False,
) -> None:
    """The newest requests, one line each (time, id, KB, outcome, route or reason, latency)."""
    with _store() as store:
        last = 0
        while True:
            for seq, record in store.tail(n, after_seq=last):
                typer.echo(_line(record))
                last = seq
            if not follow:
                return
            n = 1000
            time.sleep(1.0)


@audit_app.command()
def show(
    request_id: Annotated[str, typer.Argument(help="A request id, or a unique prefix of one.")],
    as_json: AsJson = False,
) -> None:
    """One request in full: knobs, models, the decision trail with scores and timings, feedback."""
    with _store() as store:
        try:
            record = store.get(request_id)
        except KeyError as exc:
            raise _fail(str(exc.args[0])) from None
        if record is None:
            raise _fail(f"no audit record with request id {request_id!r}")
        feedback = store.feedback_for(record.request_id)
    if as_json:
        data = record.model_dump()
        data["feedback"] = [f.model_dump() for f in feedback]
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    typer.echo(_line(record))
    typer.echo(f"question: {record.question}")
    typer.echo(f"answer:   {record.answer}")
    for c in record.citations:
        typer.echo(f"  cites {c.get('source_id')} ({c.get('score')}) {c.get('title')}")
    typer.echo(
        f"source {record.source}  thread {record.thread_id}  snapshot {record.snapshot_id}  "
        f"config {record.config_hash}  prompt {record.prompt_version}  models {record.models}"
    )
    typer.echo(
        f"tokens {record.prompt_tokens}+{record.completion_tokens}  cost ${record.cost_usd:.6f}"
        f"  redacted {record.redactions or 'nothing'}"
    )
    for step in record.trail:
        score, threshold = step.get("score"), step.get("threshold")
        versus = "" if score is None else f"  {score} vs {threshold}"
        typer.echo(
            f"  {step.get('node', ''):<16} {step.get('verdict', ''):<6} "
            f"{step.get('ms', 0.0):>8.2f} ms  {step.get('reason', '')}{versus}"
        )
        if step.get("detail"):
            typer.echo(f"  {'':<16} {json.dumps(step['detail'], ensure_ascii=False)}")
    for f in feedback:
        typer.echo(f"feedback {f.ts}: {f.score} {f.comment}")


@audit_app.command()
def stats(kb: KbFilter = None, since: Since = None, as_json: AsJson = False) -> None:
    """Counts by outcome and refusal reason, per-node latency p50/p95, tokens and cost per day."""
    from guardrag.core.audit.stats import compute_stats, render_stats  # lazy: numpy

    with _store() as store:
        result = compute_stats(store, since=_since(since), kb=kb)
    typer.echo(result.model_dump_json(indent=2) if as_json else render_stats(result))


@audit_app.command()
def export(
    fmt: Annotated[
        ExportFormat, typer.Option("--format", help="jsonl or csv.")
    ] = ExportFormat.jsonl,
    out: Annotated[
        Path | None, typer.Option("--out", help="File to write (default stdout).")
    ] = None,
    kb: KbFilter = None,
    since: Since = None,
) -> None:
    """Every record (redacted, as stored) as JSON lines or CSV (JSON columns as JSON text;
    a text cell starting like a spreadsheet formula is prefixed with an apostrophe)."""
    target = out.open("w", encoding="utf-8", newline="") if out else nullcontext(sys.stdout)
    with _store() as store, target as sink:
        count = 0
        if fmt is ExportFormat.jsonl:
            for record in store.records(_since(since), kb):
                sink.write(record.model_dump_json() + "\n")
                count += 1
        else:
            writer = csv.DictWriter(sink, fieldnames=list(AuditRecord.model_fields))
            writer.writeheader()
            for record in store.records(_since(since), kb):
                writer.writerow({k: safe_cell(v) for k, v in record.to_row().items()})
                count += 1
    if out:
        typer.echo(f"{count} records -> {out}", err=True)


@audit_app.command()
def replay(
    request_id: Annotated[str, typer.Argument(help="A request id, or a unique prefix of one.")],
    as_json: AsJson = False,
) -> None:
    """Ask a recorded question again with its recorded knobs against the current KB; show what
    changed. Exit code 0: same outcome, route, reason, citations and answer; 1: changed."""
    # lazy: the pipeline loads only to replay
    from guardrag.faces.replay import replay as run_replay
    from guardrag.faces.service import Guardrag  # lazy: see above

    with _store() as store:
        bot = Guardrag.from_settings(audit=False)  # a replay compares; it is not a request
        resume()
        try:
            report = run_replay(store, request_id, bot)
        except KeyError as exc:
            raise _fail(str(exc.args[0])) from None
        finally:
            bot.close()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "request_id": report.original.request_id,
                    "same": report.same,
                    "changes": [vars(c) for c in report.changes],
                    "context": [vars(c) for c in report.context],
                    "notes": report.notes,
                    "replayed": report.replayed.model_dump(),
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        typer.echo(report.render())
    raise typer.Exit(code=0 if report.same else 1)
