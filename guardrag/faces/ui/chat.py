"""The chat tab: one conversation thread per browser session, answers with their citations,
the route badge and the decision trail, and thumbs up/down feedback."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import gradio as gr

from guardrag.contract import Result
from guardrag.faces.service import Guardrag
from guardrag.faces.ui.common import (
    ERROR_BADGE,
    ERROR_MESSAGE,
    EXAMPLES,
    THINKING,
    TRAIL_HEADERS,
    ChatUpdate,
    FeedbackHandler,
    Message,
    TrailRow,
    answer_text,
    badge_html,
    escape_text,
    format_result,
    summary,
    trail_rows,
)
from guardrag.faces.views import RecentResults, answer_chunks, kb_summaries

log = logging.getLogger("guardrag.ui")


def ask_safely(
    bot: Guardrag, question: str, kb: str | None, thread_id: str | None = None
) -> Result | None:
    """The result, or None (logged) if the pipeline raised: the UI never shows a traceback."""
    try:
        return bot.ask(question, kb or None, thread_id=thread_id)
    except Exception:
        log.exception("unexpected error answering a question")
        return None


def session_thread(request: gr.Request | None) -> str | None:
    """Each browser session is one conversation thread (None outside a browser session)."""
    session = getattr(request, "session_hash", None)
    return f"ui-{session}" if session else None


def _say(history: list[Message], content: str) -> list[Message]:
    """A copy of `history` whose last (assistant) message reads `content`."""
    return [*history[:-1], {"role": "assistant", "content": content}]


def chat_turn(
    bot: Guardrag,
    question: str,
    history: list[Message] | None,
    kb: str | None,
    ids: dict[int, str] | None,
    *,
    recent: RecentResults | None = None,
    delay_s: float = 0.0,
    thread_id: str | None = None,
) -> Iterator[ChatUpdate]:
    """One chat turn as a stream of updates: a placeholder while the pipeline runs, then the
    checked answer in pieces, then the final message with citations and badge. Never raises.
    With a `thread_id`, follow-ups are understood in the context of the earlier turns."""
    history, ids = list(history or []), dict(ids or {})
    if not question or not question.strip():
        yield history, "", "", [], ids, ""
        return
    history += [{"role": "user", "content": escape_text(question)}]
    history += [{"role": "assistant", "content": THINKING}]
    yield history, "", "", [], ids, ""
    result = ask_safely(bot, question, kb, thread_id)
    if result is None:
        yield (
            _say(history, f"{ERROR_MESSAGE}\n\n*{ERROR_BADGE}*"),
            "",
            badge_html(None),
            [],
            ids,
            "",
        )
        return
    if recent is not None:
        recent.add(result)
    ids[len(history) - 1] = result.request_id
    shown, rows, why = badge_html(result), trail_rows(result), summary(result)
    text = ""
    for piece in answer_chunks(answer_text(result)):
        text += piece
        yield _say(history, escape_text(text)), "", shown, rows, ids, why
        time.sleep(delay_s)
    yield _say(history, format_result(result)), "", shown, rows, ids, why


def respond(
    bot: Guardrag, question: str, history: list[Message] | None, kb: str | None
) -> tuple[list[Message], str, list[TrailRow]]:
    """One chat turn without streaming: (new history, cleared input, trail rows)."""
    *_, (history, cleared, _, rows, _, _) = chat_turn(bot, question, history, kb, {})
    return history, cleared, rows


def log_feedback(request_id: str, score: int) -> None:
    """The default feedback sink: a log line (the audit store plugs in here later)."""
    log.info("feedback %+d for request %s", score, request_id)


def feedback_score(liked: bool | str | None) -> int:
    """+1 for thumbs up, -1 for thumbs down, 0 when the vote is withdrawn."""
    return 1 if liked is True else -1 if liked is False else 0


def record_feedback(
    on_feedback: FeedbackHandler, ids: dict[int, str], index: int | tuple[int, int], liked: Any
) -> None:
    """Pass a vote on the assistant message at `index` to `on_feedback`; never raises."""
    request_id = ids.get(index if isinstance(index, int) else index[0])
    if request_id is None:  # a placeholder or error message: nothing to rate
        return
    try:
        on_feedback(request_id, feedback_score(liked))
    except Exception:
        log.exception("feedback handler failed for request %s", request_id)


def kb_choices(bot: Guardrag) -> list[tuple[str, str]]:
    """(label, name) for each KB; the default KB alone if the store cannot be listed."""
    try:
        summaries = kb_summaries(bot.services.store)
    except Exception:
        log.exception("cannot list knowledge bases")
        summaries = []
    choices = [
        (f"{s.name} ({s.description})" if s.description else s.name, s.name) for s in summaries
    ]
    return choices or [(bot.settings.default_kb, bot.settings.default_kb)]


def chat_tab(
    bot: Guardrag, recent: RecentResults, on_feedback: FeedbackHandler, delay_s: float
) -> gr.Dropdown:
    """The chat tab; returns its KB picker so the KB tab can refresh it after an ingest."""
    choices = kb_choices(bot)
    names = [name for _, name in choices]
    default = bot.settings.default_kb if bot.settings.default_kb in names else names[0]
    kb = gr.Dropdown(
        choices=choices, value=default, label="Knowledge base", visible=len(choices) > 1
    )
    chat = gr.Chatbot(label="Chat", height=460, elem_id="chat")
    ids = gr.State({})
    shown = gr.HTML(elem_id="route-badge")
    with gr.Accordion("Why?", open=False, elem_id="why"):
        why = gr.Markdown()
        trail = gr.Dataframe(headers=TRAIL_HEADERS, label="Decision trail", elem_id="trail")
    question = gr.Textbox(
        placeholder="Ask a question…", show_label=False, autofocus=True, elem_id="question"
    )
    with gr.Row():
        send = gr.Button("Ask", variant="primary", elem_id="ask")
        clear = gr.Button("Clear")
    gr.Examples(EXAMPLES, inputs=question, label="Try")

    def on_submit(
        text: str,
        history: list[Message] | None,
        name: str | None,
        known: dict[int, str],
        request: gr.Request,
    ) -> Iterator[ChatUpdate]:
        thread = session_thread(request)
        yield from chat_turn(
            bot, text, history, name, known, recent=recent, delay_s=delay_s, thread_id=thread
        )

    def on_clear(request: gr.Request) -> ChatUpdate:
        """A new conversation: the thread's memory is forgotten with the visible chat."""
        thread = session_thread(request)
        if thread is not None:
            bot.threads.forget(thread)
        return [], "", "", [], {}, ""

    def on_like(known: dict[int, str], data: gr.LikeData) -> None:
        record_feedback(on_feedback, known, data.index, data.liked)

    gr.on(
        [question.submit, send.click],
        on_submit,
        inputs=[question, chat, kb, ids],
        outputs=[chat, question, shown, trail, ids, why],
        api_name="ask",
    )
    chat.like(on_like, inputs=[ids], outputs=None)
    clear.click(on_clear, outputs=[chat, question, shown, trail, ids, why])
    return kb
