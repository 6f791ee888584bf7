"""The audit tab (admin token): recent answers in memory or the persistent audit log, one
record in detail, and exports."""

from __future__ import annotations

import html
import json
import logging
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gradio as gr
from pydantic import SecretStr

from guardrag.contract import RefusalReason
from guardrag.core.audit import AuditRecord, AuditSchemaError, AuditUnavailable, SqlAuditStore
from guardrag.core.audit.sink import default_audit_url
from guardrag.core.audit.store import open_audit_store
from guardrag.core.audit.store import where as audit_where
from guardrag.faces.service import Guardrag
from guardrag.faces.ui.admin import Operator
from guardrag.faces.ui.common import (
    ALL,
    AUDIT_HEADERS,
    DENIED,
    NEEDS_OPERATOR,
    Row,
    escape_text,
    token_ok,
)
from guardrag.faces.views import RecentResults, Recorded

log = logging.getLogger("guardrag.ui")


def filter_records(recent: RecentResults, outcome: str, reason: str) -> list[Recorded]:
    """Recent results, newest first, with the given outcome and refusal reason (or ALL)."""
    return [
        r
        for r in recent.items()
        if outcome in (ALL, r.result.outcome)
        and (reason == ALL or (r.result.refusal and r.result.refusal.reason.value == reason))
    ]


def audit_row(record: Recorded) -> Row:
    """A recent (unredacted, in-memory) result as a table row, its free text escaped."""
    result = record.result
    route = result.refusal.reason.value if result.refusal else result.route
    return [
        record.at.strftime("%Y-%m-%d %H:%M:%S"),
        escape_text(record.kb),
        escape_text(result.request_id),
        escape_text(result.question),
        result.outcome,
        escape_text(route or ""),
        round(result.latency_ms),
    ]


@contextmanager
def open_audit(url: str) -> Iterator[SqlAuditStore | None]:
    """The audit store at `url` (as `guardrag audit` opens it), or None while its SQLite file
    is not written yet; closed afterwards. Raises AUDIT_ERRORS when it cannot be read."""
    local = "://" not in url or url.startswith("sqlite:///")
    if local and not Path(url.removeprefix("sqlite:///")).is_file():
        yield None
        return
    store = open_audit_store(url)
    try:
        yield store
    finally:
        store.close()


AUDIT_ERRORS = (AuditSchemaError, AuditUnavailable, sqlite3.Error, OSError)


def stored_records(
    store: SqlAuditStore, outcome: str, reason: str, limit: int
) -> tuple[list[AuditRecord], int, int]:
    """The newest `limit` stored records with this outcome and reason (newest first), the
    number that match, and the number in the log."""
    where, params = audit_where(
        outcome=None if outcome == ALL else outcome,
        refusal_reason=None if reason == ALL else reason,
    )
    ids = store.query(
        f"SELECT request_id FROM requests {where} ORDER BY seq DESC LIMIT ?", [*params, limit]
    )
    matching = int(store.query(f"SELECT COUNT(*) FROM requests {where}", params)[0][0])
    records = [record for (rid,) in ids if (record := store.get(str(rid))) is not None]
    return records, matching, store.count()


def stored_row(record: AuditRecord) -> Row:
    """A stored (already redacted) record as a table row, its free text escaped."""
    route = record.route if record.outcome == "answered" else record.refusal_reason
    return [
        record.ts.replace("T", " ")[:19],
        escape_text(record.kb),
        escape_text(record.request_id),
        escape_text(record.question),
        escape_text(record.outcome),
        escape_text(route or ""),
        round(record.latency_ms),
    ]


def _audit_failed(exc: Exception) -> str:
    log.warning("audit store unreadable: %s", exc)
    return f"Audit store unavailable: {escape_text(f'{type(exc).__name__}: {exc}')}"


def audit_view(
    expected: SecretStr | None,
    recent: RecentResults,
    token: str,
    outcome: str,
    reason: str,
    *,
    audit_url: str | None = None,
    limit: int = 200,
) -> tuple[str, list[Row]]:
    """(status line, table rows) for the Audit tab, or a refusal without the right token.

    With `audit_url` the rows come from the audit store (newest `limit` matching requests);
    without one, from the in-memory recent results."""
    if not token_ok(expected, token):
        return DENIED, []
    if audit_url is None:
        found = filter_records(recent, outcome, reason)
        return f"{len(found)} of the last {len(recent.items())} requests", [
            audit_row(r) for r in found
        ]
    try:
        with open_audit(audit_url) as store:
            if store is None:
                return "0 requests in the audit log (nothing recorded yet)", []
            records, matching, total = stored_records(store, outcome, reason, limit)
    except AUDIT_ERRORS as exc:
        return _audit_failed(exc), []
    return (
        f"{len(records)} of {matching} matching requests in the audit log "
        f"({total} in all), newest first",
        [stored_row(r) for r in records],
    )


def audit_detail(
    expected: SecretStr | None,
    recent: RecentResults,
    token: str,
    request_id: str,
    *,
    audit_url: str | None = None,
) -> dict[str, Any]:
    """One request in full (empty without the token or if unknown): the stored, redacted
    record with its feedback when there is an audit store, else the recent result object."""
    if not token_ok(expected, token) or not request_id:
        return {}
    if audit_url is None:
        recorded = recent.get(html.unescape(request_id))
        return recorded.result.model_dump(mode="json") if recorded else {}
    try:
        with open_audit(audit_url) as store:
            record = store.get(html.unescape(request_id)) if store else None
            if store is None or record is None:
                return {}
            feedback = store.feedback_for(record.request_id)
    except (*AUDIT_ERRORS, KeyError) as exc:
        log.warning("audit detail for %r unavailable: %s", request_id, exc)
        return {}
    return {**record.model_dump(mode="json"), "feedback": [f.model_dump() for f in feedback]}


def audit_export(
    expected: SecretStr | None,
    recent: RecentResults,
    token: str,
    outcome: str,
    reason: str,
    *,
    audit_url: str | None = None,
) -> str | None:
    """A JSONL file of the filtered requests, or None if denied (or the store is unreadable):
    every matching stored record (redacted, as `guardrag audit export` writes them, oldest
    first) when there is an audit store, else the recent result objects."""
    if not token_ok(expected, token):
        return None
    with tempfile.NamedTemporaryFile(
        "w", suffix=".jsonl", prefix="guardrag-audit-", delete=False, encoding="utf-8"
    ) as handle:
        if audit_url is None:
            for recorded in filter_records(recent, outcome, reason):
                row = {"at": recorded.at.isoformat(), **recorded.result.model_dump(mode="json")}
                handle.write(json.dumps(row) + "\n")
            return handle.name
        try:
            with open_audit(audit_url) as store:
                for record in store.records() if store else ():
                    if outcome in (ALL, record.outcome) and reason in (ALL, record.refusal_reason):
                        handle.write(record.model_dump_json() + "\n")
        except AUDIT_ERRORS as exc:
            log.warning("audit export failed: %s", exc)
            handle.close()
            Path(handle.name).unlink(missing_ok=True)
            return None
    return handle.name


def audit_tab(bot: Guardrag, recent: RecentResults, operator: Operator) -> None:
    settings = bot.settings
    expected = settings.admin_token
    # The persistent audit store when the bot records to one; else the in-memory recent list.
    url = default_audit_url(settings) if bot.audit else None
    limit = settings.recent_results
    if expected is None:
        commands = "`guardrag audit tail`, `guardrag audit show ID`"
        gr.Markdown(NEEDS_OPERATOR.format(commands=commands), elem_id="audit-disabled")
        return
    with gr.Row():
        outcome = gr.Dropdown([ALL, "answered", "choices", "refused"], value=ALL, label="Outcome")
        reason = gr.Dropdown([ALL, *(r.value for r in RefusalReason)], value=ALL, label="Reason")
        show = gr.Button("Show recent requests", elem_id="audit-show")
        export = gr.Button("Export JSONL")
    status = gr.Markdown(elem_id="audit-status")
    table = gr.Dataframe(
        headers=AUDIT_HEADERS,
        # Text cells are escaped (escape_text) and rendered as markdown, so they read as typed.
        datatype=["str", "markdown", "markdown", "markdown", "markdown", "markdown", "number"],
        label="Recent requests (select a row for the full record)",
        column_widths=["13%", "9%", "19%", "29%", "9%", "13%", "8%"],
        wrap=True,
        elem_id="audit-table",
    )
    detail = gr.JSON(label="Audit record" if url else "Result", elem_id="audit-detail")
    download = gr.File(label="Export", interactive=False, visible=False, elem_id="audit-export")

    def settle() -> None:
        """Let the writer store what was just asked (bounded: the UI never waits long)."""
        if bot.audit is not None:
            bot.audit.flush(timeout=2.0, retry=False)

    def on_show(session: str, kind: str, why: str) -> tuple[str, list[Row]]:
        if token_ok(expected, session):
            settle()
        return audit_view(expected, recent, session, kind, why, audit_url=url, limit=limit)

    def on_select(session: str, data: gr.SelectData) -> dict[str, Any]:
        row = data.row_value or []
        request_id = str(row[2]) if len(row) > 2 else ""
        return audit_detail(expected, recent, session, request_id, audit_url=url)

    inputs = [operator.session, outcome, reason]
    show.click(on_show, inputs=inputs, outputs=[status, table])
    table.select(on_select, inputs=[operator.session], outputs=[detail])
    operator.then(
        lambda session: ("" if token_ok(expected, session) else DENIED, [], {}),
        inputs=[operator.session],
        outputs=[status, table, detail],
    )

    def on_export(session: str, kind: str, why: str) -> Any:
        if token_ok(expected, session):
            settle()
        path = audit_export(expected, recent, session, kind, why, audit_url=url)
        return gr.update(value=path, visible=path is not None)

    export.click(on_export, inputs=inputs, outputs=[download])
