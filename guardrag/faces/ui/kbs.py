"""The knowledge-base tab (admin token): the KBs and their quarantined entries, and uploads
ingested into a new snapshot."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from guardrag.config.settings import Settings, validate_kb_name
from guardrag.core.kb.entries import IngestError
from guardrag.core.kb.ingest import ingest
from guardrag.core.kb.readers import load_entries
from guardrag.faces.service import Guardrag
from guardrag.faces.ui.chat import kb_choices
from guardrag.faces.ui.common import (
    DENIED,
    KB_HEADERS,
    NO_TOKEN,
    QUARANTINE_HEADERS,
    SAFE_NAME,
    UPLOAD_TYPES,
    Row,
    escape_text,
    token_ok,
)
from guardrag.faces.views import kb_summaries

log = logging.getLogger("guardrag.ui")


def kb_rows(bot: Guardrag) -> list[Row]:
    return [
        [s.name, s.description, s.entries, s.snapshot_id, s.updated_at]
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
    """Validate, stage and ingest an uploaded FAQ file into `kb` with the bot's own store and
    embedder; returns a status line (escaped). The previous snapshot serves on any failure."""
    if not token_ok(bot.settings.admin_token, token):
        return DENIED
    try:
        kb = validate_kb_name(kb.strip())
        file = stage_upload(bot.settings, kb, check_upload(path, bot.settings.upload_max_bytes))
        total = len(load_entries([file])[0])
        done = 0

        def advance(count: int) -> None:
            nonlocal done
            done += count
            if progress is not None:
                progress((done, total))

        report = ingest(
            bot.services.store,
            bot.services.embedder,
            kb,
            [file],
            description=description.strip() or None,
            progress=advance,
        )
    except (IngestError, ValueError, OSError) as exc:
        return f"Not ingested: {escape_text(str(exc))}"
    return f"Ingested: {escape_text(report.summary())}"


def kb_tab(bot: Guardrag, picker: gr.Dropdown) -> None:
    table = gr.Dataframe(
        kb_rows(bot), headers=KB_HEADERS, label="Knowledge bases", elem_id="kb-table"
    )
    quarantined = gr.Dataframe(
        quarantine_rows(bot),
        headers=QUARANTINE_HEADERS,
        datatype="markdown",  # escaped by quarantine_rows, rendered so it reads as written
        label="Held back at ingest as possible prompt injection (never indexed or served)",
        wrap=True,
        elem_id="kb-quarantine",
    )
    refresh = gr.Button("Refresh")
    refresh.click(lambda: (kb_rows(bot), quarantine_rows(bot)), outputs=[table, quarantined])
    gr.Markdown(
        f"**Ingest a file** ({', '.join(UPLOAD_TYPES)}; at most "
        f"{bot.settings.upload_max_bytes // 1000} kB). Re-uploading a file updates its entries."
    )
    if bot.settings.admin_token is None:
        gr.Markdown(f"Upload is {NO_TOKEN}", elem_id="upload-disabled")
        return
    with gr.Row():
        file = gr.File(
            label="FAQ or document file", file_types=list(UPLOAD_TYPES), elem_id="kb-file"
        )
        with gr.Column():
            kb = gr.Textbox(bot.settings.default_kb, label="Knowledge base name", elem_id="kb-name")
            description = gr.Textbox(label="Description (optional)")
            token = gr.Textbox(label="Admin token", type="password", elem_id="kb-token")
            run = gr.Button("Ingest", variant="primary", elem_id="kb-ingest")
    status = gr.Markdown(elem_id="kb-status")

    def on_ingest(
        given: str,
        path: str | None,
        name: str,
        text: str,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (how Gradio injects a progress bar)
    ) -> tuple[str, list[Row], list[Row], Any]:
        def track(step: tuple[int, int]) -> None:
            progress(step, desc="Embedding", unit="entries")

        message = ingest_upload(bot, given, path, name, text, track)
        choices = kb_choices(bot)
        update = gr.update(choices=choices, visible=len(choices) > 1)
        return message, kb_rows(bot), quarantine_rows(bot), update

    run.click(
        on_ingest,
        inputs=[token, file, kb, description],
        outputs=[status, table, quarantined, picker],
    )
