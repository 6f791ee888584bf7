"""The knowledge-base tab, for the signed-in operator: the KBs on disk (refreshed on every page
load and after each ingest), their quarantined entries, a browser over any KB's entries, and
uploads ingested into a new snapshot. Nothing here is listed for a session not signed in."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from guardrag.config.settings import Settings, validate_kb_name
from guardrag.core.kb.entries import IngestError
from guardrag.core.kb.ingest import ingest_parsed, parse
from guardrag.core.kb.readers import IngestLimits
from guardrag.faces.service import Guardrag
from guardrag.faces.ui.admin import Operator
from guardrag.faces.ui.chat import ChatTab
from guardrag.faces.ui.common import (
    DENIED,
    ENTRY_HEADERS,
    KB_HEADERS,
    NEEDS_OPERATOR,
    QUARANTINE_HEADERS,
    SAFE_NAME,
    SIGN_IN_FIRST,
    UPLOAD_TYPES,
    Row,
    escape_text,
    token_ok,
)
from guardrag.faces.ui.uploads import discard
from guardrag.faces.views import kb_entries, kb_summaries

log = logging.getLogger("guardrag.ui")

#: Entries shown per page in the browser, and characters of each entry's text in the table.
PAGE = 20
EXCERPT = 160


def kb_rows(bot: Guardrag) -> list[Row]:
    return [
        [escape_text(s.name), escape_text(s.description), s.entries, s.snapshot_id, s.updated_at]
        for s in kb_summaries(bot.services.store)
    ]


def quarantine_rows(bot: Guardrag) -> list[Row]:
    """Entries each KB held back at ingest as possible prompt injection (kb, location,
    source id, why), escaped: they are the very text an attacker wrote."""
    store = bot.services.store
    rows: list[Row] = []
    try:
        for name in sorted(store.list_kbs()):
            info = store.kb_info(name)
            for held in info.extra.get("quarantined", []) if info else []:
                rows.append(
                    [
                        escape_text(name),
                        escape_text(str(held.get("location", ""))),
                        escape_text(str(held.get("source_id", ""))),
                        escape_text(str(held.get("why", ""))),
                    ]
                )
    except Exception:
        log.exception("cannot list quarantined entries")
    return rows


def entry_rows(bot: Guardrag, kb: str, page: int) -> list[Row]:
    """One page of a KB's entries, escaped and cut short for the table."""
    try:
        entries = kb_entries(bot.services.store, kb, max(0, page - 1) * PAGE, PAGE)
    except Exception:
        log.exception("cannot browse %s", kb)
        return []

    def short(text: str) -> str:
        return escape_text(text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…")

    return [
        [escape_text(e.source_id), e.kind, short(e.title), short(e.text), escape_text(e.url or "")]
        for e in entries
    ]


def entry_preview(bot: Guardrag, kb: str, page: int, index: int) -> str:
    """One entry in full (escaped): its title, text, link and category."""
    entries = kb_entries(bot.services.store, kb, max(0, page - 1) * PAGE + index, 1)
    if not entries:
        return ""
    e = entries[0]
    return (
        f"**{escape_text(e.title)}** (`{escape_text(e.source_id)}`, {e.kind}"
        f"{', ' + escape_text(e.category) if e.category else ''})\n\n{escape_text(e.text)}\n\n"
        f"{escape_text(e.url or '')}"
    )


def check_upload(path: str | None, max_bytes: int) -> Path:
    """The uploaded file, if it has an accepted type and size; else IngestError saying why."""
    if not path:
        raise IngestError("choose a file first")
    file = Path(path)
    if file.suffix.lower() not in UPLOAD_TYPES:
        raise IngestError(f"unsupported file type {file.suffix!r}; use {', '.join(UPLOAD_TYPES)}")
    if file.stat().st_size > max_bytes:
        raise IngestError(f"file too large ({file.stat().st_size} bytes; limit {max_bytes})")
    return file


def stage_upload(settings: Settings, kb: str, file: Path) -> Path:
    """Copy the upload to <data_dir>/uploads/<kb>/<name>: a stable path, so re-uploading the
    same file updates its rows (ingest keys rows by source file) instead of adding a copy."""
    target = settings.data_dir / "uploads" / kb / (SAFE_NAME.sub("_", file.name) or "upload")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(file, target)
    return target


def ingest_upload(
    bot: Guardrag,
    token: str,
    path: str | None,
    kb: str,
    description: str,
    progress: Callable[[tuple[int, int]], Any] | None = None,
) -> str:
    """Validate, stage and ingest an uploaded file into `kb` with the bot's own store and
    embedder; returns a status line (escaped). The previous snapshot serves on any failure,
    and the upload itself is deleted from the upload folder either way."""
    try:
        if not token_ok(bot.settings.admin_token, token):
            return DENIED
        if not kb.strip():
            raise IngestError("name the knowledge base first (a new name, or one to add to)")
        limits = IngestLimits.from_settings(bot.settings)
        kb = validate_kb_name(kb.strip(), "Knowledge base name")
        file = stage_upload(bot.settings, kb, check_upload(path, bot.settings.upload_max_bytes))
        parsed = parse([file], limits=limits)  # read once: its entry count, then ingested
        total = len(parsed.entries)
        done = 0

        def advance(count: int) -> None:
            nonlocal done
            done += count
            if progress is not None:
                progress((done, total))

        report = ingest_parsed(
            bot.services.store,
            bot.services.embedder,
            kb,
            parsed,
            description=description.strip() or None,
            progress=advance,
        )
    except (IngestError, ValueError, OSError) as exc:
        return f"Not ingested: {escape_text(str(exc))}"
    finally:
        discard(path)
    return f"Ingested: {escape_text(report.summary())}"


def kb_tab(bot: Guardrag, chat: ChatTab, operator: Operator) -> Callable[[str], tuple[Any, ...]]:
    """The tab; returns its refresh (for the page load): (status, KB table, quarantine,
    browser's KB choices) as the store is now, or nothing without a sign-in."""
    settings = bot.settings
    if settings.admin_token is None:
        commands = "`guardrag kbs`, `guardrag ingest FILE --kb NAME`"
        gr.Markdown(NEEDS_OPERATOR.format(commands=commands), elem_id="kb-access")
        return lambda session: ()
    status = gr.Markdown(SIGN_IN_FIRST, elem_id="kb-access")
    table = gr.Dataframe(
        headers=KB_HEADERS, datatype="markdown", label="Knowledge bases", elem_id="kb-table"
    )
    quarantined = gr.Dataframe(
        headers=QUARANTINE_HEADERS,
        datatype="markdown",  # escaped by quarantine_rows, rendered so it reads as written
        label="Held back at ingest as possible prompt injection (never indexed or served)",
        wrap=True,
        elem_id="kb-quarantine",
    )
    with gr.Accordion("Browse entries", open=False, elem_id="kb-browse"):
        with gr.Row():
            browse_kb = gr.Dropdown(choices=[], label="Knowledge base", elem_id="browse-kb")
            page = gr.Number(1, minimum=1, precision=0, label="Page", elem_id="browse-page")
        entries = gr.Dataframe(
            headers=ENTRY_HEADERS, datatype="markdown", wrap=True, elem_id="kb-entries"
        )
        preview = gr.Markdown(elem_id="kb-preview")

    def refresh(session: str) -> tuple[Any, ...]:
        if not operator.ok(session):
            return SIGN_IN_FIRST, [], [], gr.update(choices=[], value=None)
        names = [s.name for s in kb_summaries(bot.services.store)]
        return "", kb_rows(bot), quarantine_rows(bot), gr.update(choices=names)

    def on_browse(session: str, kb: str | None, number: float | None) -> tuple[list[Row], str]:
        if not operator.ok(session) or not kb:
            return [], ""
        return entry_rows(bot, kb, int(number or 1)), ""

    def on_preview(session: str, kb: str | None, number: float | None, data: gr.SelectData) -> str:
        if not operator.ok(session) or not kb:
            return ""
        row = data.index[0] if isinstance(data.index, list | tuple) else int(data.index)
        return entry_preview(bot, kb, int(number or 1), row)

    views = [status, table, quarantined, browse_kb]
    operator.then(refresh, inputs=[operator.session], outputs=views)
    gr.Button("Refresh", elem_id="kb-refresh").click(
        refresh, inputs=[operator.session], outputs=views
    )
    for trigger in (browse_kb.change, page.change):
        trigger(on_browse, inputs=[operator.session, browse_kb, page], outputs=[entries, preview])
    entries.select(on_preview, inputs=[operator.session, browse_kb, page], outputs=[preview])

    _upload_form(bot, chat, operator, views, refresh)
    return refresh


def _upload_form(
    bot: Guardrag,
    chat: ChatTab,
    operator: Operator,
    views: list[Any],
    refresh: Callable[[str], tuple[Any, ...]],
) -> None:
    """The operator's upload: a file and the KB it goes to (named each time), ingested into a
    new snapshot; the KB views and the chat's picker follow."""
    settings = bot.settings
    gr.Markdown(
        f"**Ingest a file** ({', '.join(UPLOAD_TYPES)}; at most "
        f"{settings.upload_max_bytes // 1000} kB). Re-uploading a file updates its entries."
    )
    with gr.Row():
        file = gr.File(
            label="FAQ or document file", file_types=list(UPLOAD_TYPES), elem_id="kb-file"
        )
        with gr.Column():
            kb = gr.Textbox(  # no default: a gym FAQ must not land in the e-wallet KB unasked
                label="Knowledge base name",
                placeholder="a new name, or an existing KB to add to",
                elem_id="kb-name",
            )
            description = gr.Textbox(label="Description (optional)")
            run = gr.Button("Ingest", variant="primary", elem_id="kb-ingest")
    result = gr.Markdown(elem_id="kb-status")

    def on_ingest(
        session: str,
        path: str | None,
        name: str,
        text: str,
        chosen: str | None,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (how Gradio injects a progress bar)
    ) -> tuple[Any, ...]:
        def track(step: tuple[int, int]) -> None:
            progress(step, desc="Embedding", unit="entries")

        message = ingest_upload(bot, session, path, name, text, track)
        return (message, *refresh(session), *chat.refresh(bot, chosen))

    run.click(
        on_ingest,
        inputs=[operator.session, file, kb, description, chat.picker],
        outputs=[result, *views, chat.picker, chat.current, chat.examples],
    )
