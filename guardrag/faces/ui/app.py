"""The Gradio app over guardrag: chat, audit, knowledge-base and graph tabs.

Answers appear only after the whole pipeline (guards included) has run. Run with `python
app.py` (GUARDRAG_HOST:GUARDRAG_PORT, default 127.0.0.1:7860, no share link); `guardrag serve`
mounts the same app at /ui next to the HTTP API.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import gradio as gr

from guardrag.faces.service import Guardrag
from guardrag.faces.ui.audit import audit_tab
from guardrag.faces.ui.chat import chat_tab, log_feedback
from guardrag.faces.ui.common import CSS, FeedbackHandler
from guardrag.faces.ui.kbs import kb_tab
from guardrag.faces.views import RecentResults

log = logging.getLogger("guardrag.ui")


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

    Feedback goes to the bot's audit log (or is logged when it has none).
    """
    recent = recent if recent is not None else RecentResults(bot.settings.recent_results)
    on_feedback = on_feedback or (bot.feedback if bot.audit else log_feedback)
    picture = graph_png(Path(tempfile.mkdtemp(prefix="guardrag-ui-")))
    with gr.Blocks(title="guardrag", analytics_enabled=False) as demo:
        gr.Markdown("## guardrag\nAnswers only from a verified knowledge base; refuses the rest.")
        with gr.Tab("Chat"):
            picker = chat_tab(bot, recent, on_feedback, delay_s)
        with gr.Tab("Audit"):
            audit_tab(bot, recent)
        with gr.Tab("Knowledge base"):
            kb_tab(bot, picker)
        with gr.Tab("Graph"):
            if picture is None:
                gr.Markdown("The graph cannot be drawn here (Graphviz unavailable).")
            else:
                gr.Image(str(picture), show_label=False, interactive=False)
    return demo.queue(default_concurrency_limit=4)


def main() -> None:
    """Build the real services from GUARDRAG_* settings and serve the UI locally."""
    logging.basicConfig(level=logging.INFO)
    bot = Guardrag.from_settings(source="ui")
    bot.warm_up()
    try:
        build_app(bot).launch(
            server_name=bot.settings.host,
            server_port=bot.settings.port,
            share=False,
            max_file_size=bot.settings.upload_max_bytes,
            css=CSS,
        )
    finally:
        bot.close()
