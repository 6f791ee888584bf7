"""The Gradio app over guardrag: an operator sign-in, then chat, audit, knowledge-base and
graph tabs.

While a question runs the chat shows the stage it is at; the answer's text appears only after
the whole pipeline (guards included) has run. Run with `python
app.py` (GUARDRAG_HOST:GUARDRAG_PORT, default 127.0.0.1:7860, no share link); `guardrag serve`
mounts the same app at /ui next to the HTTP API.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

import gradio as gr

from guardrag.contract import GuardragError
from guardrag.core.llm.client import unavailable_reason
from guardrag.faces.service import Guardrag
from guardrag.faces.startup import resume
from guardrag.faces.ui.admin import sign_in_row
from guardrag.faces.ui.audit import audit_tab
from guardrag.faces.ui.chat import chat_tab, log_feedback
from guardrag.faces.ui.common import CSS, FeedbackHandler
from guardrag.faces.ui.kbs import kb_tab
from guardrag.faces.ui.uploads import SWEEP, NoUploadsMiddleware, upload_dir
from guardrag.faces.views import RecentResults

log = logging.getLogger("guardrag.ui")
#: Seconds Ctrl+C waits for open connections (browser tabs, answers still coming) to close.
GRACEFUL_SHUTDOWN_S = 5


def graph_png(directory: Path) -> Path | None:
    """The pipeline graph drawn offline by Graphviz, or None (logged) if it cannot be drawn."""
    from guardrag.graph.builder import build_graph  # lazy: only when the picture is drawn

    path = directory / "guardrag-graph.png"
    try:
        build_graph().get_graph().draw_png(str(path))
    except Exception:
        log.exception("cannot draw the pipeline graph")
        return None
    return path


def build_app(
    bot: Guardrag,
    *,
    recent: RecentResults | None = None,
    on_feedback: FeedbackHandler | None = None,
    delay_s: float = 0.02,
) -> gr.Blocks:
    """The whole UI over `bot`; `recent` is shared with the API when both run in one process.

    Feedback goes to the bot's audit log (or is logged when it has none). Each page load
    re-reads the KBs on disk (picker, current KB, examples, the operator's KB table), so a KB
    ingested by another process or browser shows up without a restart.
    """
    recent = recent if recent is not None else RecentResults(bot.settings.recent_results)
    on_feedback = on_feedback or (bot.feedback if bot.audit else log_feedback)
    picture = graph_png(Path(tempfile.mkdtemp(prefix="guardrag-ui-")))
    with gr.Blocks(title="guardrag", analytics_enabled=False, delete_cache=SWEEP) as demo:
        gr.Markdown("## guardrag\nAnswers only from a verified knowledge base; refuses the rest.")
        if bot.services.chat_model is None:  # say why, instead of letting refusals puzzle
            why = unavailable_reason(bot.settings) or "no language model is configured"
            gr.Markdown(
                f"**Generated answers are off** ({why}). Questions that match the knowledge "
                "base closely are still answered; the others are refused.",
                elem_id="llm-off",
            )
        operator = sign_in_row(bot.settings.admin_token)
        with gr.Tab("Chat"):
            chat = chat_tab(bot, recent, on_feedback, delay_s, operator)
        with gr.Tab("Audit"):
            audit_tab(bot, recent, operator)
        with gr.Tab("Knowledge base"):
            kb_tab(bot, chat, operator)  # refreshed at each sign-in: it shows nothing before
        with gr.Tab("Graph"):
            if picture is None:
                gr.Markdown("The graph cannot be drawn here (Graphviz unavailable).")
            else:
                gr.Image(str(picture), show_label=False, interactive=False)

        def on_load(chosen: str | None) -> tuple[Any, ...]:
            return chat.refresh(bot, chosen)

        demo.load(on_load, inputs=[chat.picker], outputs=[chat.picker, chat.current, chat.examples])
    return demo.queue(default_concurrency_limit=4)


class _OpenTabsClosed(logging.Filter):
    """Drops uvicorn's error record for each stream it cancels at the shutdown bound: at the
    demo's Ctrl+C that is an open tab's expected end, not a failure worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


def main() -> None:
    """Build the real services from GUARDRAG_* settings and serve the UI locally (mounted on
    a FastAPI app, so that uploads are refused outright when there is no admin token)."""
    # lazy: the web server loads only to serve
    import uvicorn
    from fastapi import FastAPI

    logging.basicConfig(level=logging.INFO)
    logging.getLogger("uvicorn.error").addFilter(_OpenTabsClosed())
    try:
        bot = Guardrag.from_settings(source="ui")
    except GuardragError as exc:  # a bad setting, a locked data dir: one line, as the CLI says it
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    settings = bot.settings
    upload_dir(settings)  # before the UI is built: Gradio reads it when it starts
    bot.warm_up()
    app = gr.mount_gradio_app(
        FastAPI(docs_url=None, redoc_url=None, openapi_url=None),
        build_app(bot),
        path="",
        max_file_size=settings.upload_max_bytes,
        show_error=False,
        css=CSS,
    )
    if settings.admin_token is None:
        app.add_middleware(NoUploadsMiddleware)
    resume()
    try:
        # An open browser tab keeps Gradio's event stream open: without a bound, Ctrl+C on the
        # demo waited until every tab was closed.
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            server_header=False,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
    finally:
        bot.close()
