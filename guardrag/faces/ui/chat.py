"""The chat tab: one conversation thread per browser session; progress while the pipeline
runs, with a Stop button; a generated answer's sentences as each passes the grounding and
output checks, while the model still writes; answers with their sources in plain words; "Did
you mean ..." after a not-found refusal; the Why? panel (codes, scores, trail) for operators
only.

Operators are the signed-in session, or everyone when no admin token is configured (the
trusted demo): a customer never receives a reason code, a score or the trail, not even in a
hidden component.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr

from guardrag.contract import Result
from guardrag.core.audit import AuditUnavailable
from guardrag.core.store import IndexUnavailable
from guardrag.faces.asking import Asked, Progress, ask_with_progress, ensure_audited
from guardrag.faces.sentences import WITHDRAWN_NOTE, Sentence, continuation
from guardrag.faces.service import Guardrag
from guardrag.faces.ui.admin import Operator
from guardrag.faces.ui.common import (
    ERROR_MESSAGE,
    STOPPED,
    THINKING,
    TRAIL_HEADERS,
    FeedbackHandler,
    Message,
    TrailRow,
    answer_text,
    badge_html,
    escape_text,
    format_result,
    trail_rows,
    why_markdown,
)
from guardrag.faces.views import RecentResults, answer_chunks, kb_examples, kb_summaries

log = logging.getLogger("guardrag.ui")

DID_YOU_MEAN = "Did you mean one of these?"
AUDIT_FAILED = "Sorry, this answer could not be recorded, so it is not shown. Please try again."

# One chat update: history, question box, badge, trail rows, message index -> request id, why.
ChatUpdate = tuple[list[Message], str | dict[str, Any], str, list[TrailRow], dict[int, str], str]
#: The question box as the customer left it: cleared when a question is taken, then never
#: touched again by that turn's updates (what they type meanwhile is the next question).
KEEP: dict[str, Any] = gr.skip()


def session_thread(request: gr.Request | None) -> str | None:
    """Each browser session is one conversation thread (None outside a browser session)."""
    session = getattr(request, "session_hash", None)
    return f"ui-{session}" if session else None


class StopRequests:
    """When each browser session last pressed Stop. Stop cancels the running turn, but an
    update already on its way (a stage line sent while the cancel travels) would otherwise
    overwrite "Stopped"; a turn that started before the session's last Stop ends with the
    stopped reply instead of sending any further update."""

    def __init__(self, limit: int = 10_000) -> None:
        self._at: dict[str, float] = {}
        self._limit = limit
        self._lock = threading.Lock()  # Stop clicks of several sessions arrive on many threads

    def stop(self, session: str | None) -> None:
        """Records a Stop for `session` now (the oldest records go past `limit`)."""
        if not session:
            return
        with self._lock:
            self._at.pop(session, None)
            self._at[session] = time.monotonic()
            while len(self._at) > self._limit:
                self._at.pop(next(iter(self._at)))

    def since(self, session: str | None, started: float) -> bool:
        """Whether `session` pressed Stop after `started` (a time.monotonic() reading)."""
        return session is not None and self._at.get(session, float("-inf")) >= started

    def guard(self, session: str | None, turn: Iterator[ChatUpdate]) -> Iterator[ChatUpdate]:
        """`turn`'s updates until the session presses Stop; then one stopped update, no more."""
        started = time.monotonic()
        for update in turn:
            if self.since(session, started):
                history, _, _, _, ids, _ = update
                yield stopped(history), KEEP, "", [], ids, ""
                return
            yield update


def _say(history: list[Message], content: str, **extra: Any) -> list[Message]:
    """A copy of `history` whose last (assistant) message reads `content`."""
    return [*history[:-1], {"role": "assistant", "content": content, **extra}]


def _run(
    bot: Guardrag, question: str, kb: str | None, thread_id: str | None
) -> Iterator[Progress | Sentence | Asked | Exception]:
    """Progress and verified sentences as the pipeline reports them, then the audited result
    (or what went wrong)."""
    events: queue.Queue[Progress | Sentence | Asked | Exception] = queue.Queue()

    def work() -> None:
        try:
            asked = ask_with_progress(
                bot,
                question,
                kb or None,
                thread_id=thread_id,
                on_progress=events.put,
                on_sentence=events.put,
            )
            ensure_audited(bot, asked.result)
            events.put(asked)
        except Exception as exc:  # shown as a plain message; the log has the details
            events.put(exc)

    threading.Thread(target=work, name="guardrag-ui-ask", daemon=True).start()
    while True:
        item = events.get()
        yield item
        if not isinstance(item, Progress | Sentence):
            return


def _waiting(sentences: list[str], label: str) -> str:
    """The verified sentences so far, with the stage the question is at below them."""
    shown = escape_text(" ".join(sentences))
    return f"{shown}\n\n*{label}*" if shown else f"*{label}*"


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
    operator: bool = True,
) -> Iterator[ChatUpdate]:
    """One chat turn as a stream of updates: the stage the pipeline is at (below a generated
    answer's sentences as each is verified), then the checked answer in pieces (unless its
    sentences already showed), then the final message with its sources (and "did you mean"
    entries after a not-found refusal). Never raises. `operator` adds the Why? panel's data."""
    history, ids = list(history or []), dict(ids or {})
    if not question or not question.strip():
        yield history, "", "", [], ids, ""
        return
    history += [{"role": "user", "content": escape_text(question)}]
    history += [{"role": "assistant", "content": THINKING}]
    yield history, "", "", [], ids, ""
    sentences: list[str] = []
    label = ""
    for item in _run(bot, question, kb, thread_id):
        if isinstance(item, Progress | Sentence):
            if isinstance(item, Progress):
                label = item.label
            else:
                sentences.append(item.text)
            yield _say(history, _waiting(sentences, label)), KEEP, "", [], ids, ""
            continue
        if isinstance(item, Exception):
            failed = AUDIT_FAILED if isinstance(item, AuditUnavailable) else ERROR_MESSAGE
            if not isinstance(item, AuditUnavailable):
                log.error("unexpected error answering a question", exc_info=item)
            yield _say(history, failed), KEEP, badge_html(None), [], ids, ""
            return
        result = item.result
        if recent is not None:
            recent.add(result, kb or bot.settings.default_kb)
        ids[len(history) - 1] = result.request_id
        shown = badge_html(result)
        rows, why = (trail_rows(result), why_markdown(result)) if operator else ([], "")
        max_bytes = bot.settings.ingest_max_field_bytes
        fits = len(answer_text(result).encode("utf-8", "surrogatepass")) <= max_bytes
        if fits and not sentences:
            text = ""
            for piece in answer_chunks(answer_text(result)):
                text += piece
                yield _say(history, escape_text(text)), KEEP, shown, rows, ids, why
                time.sleep(delay_s)
        final = _final(history, result, item.suggestions(), max_bytes, sentences)
        yield final, KEEP, shown, rows, ids, why
        return


def _text_of(message: Message) -> str:
    """A message's text, whether Gradio sent it back as a string or as content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


#: How long after Stop the stopped reply is said once more (see `_settle_stop`).
STOP_SETTLE_S = 0.5


def _settle_stop(history: list[Message] | None) -> list[Message]:
    """The stopped reply, said again a moment after Stop: a stage line the turn sent just
    before the Stop was recorded can reach the page after Stop's own reply and would stay
    there, the turn being cancelled (seen in the browser test about 1 run in 3)."""
    time.sleep(STOP_SETTLE_S)
    return stopped(history)


def stopped(history: list[Message] | None) -> list[Message]:
    """The chat after Stop: a reply still waiting (its stage line in italics below it) says
    it was stopped instead. Sentences it showed are withdrawn too: the final checks never ran
    on the whole answer. A finished reply is left as it is."""
    history = list(history or [])
    if not history or history[-1].get("role") != "assistant":
        return history
    text = _text_of(history[-1]).rstrip()
    if history[-1].get("options") or not (text.endswith("*") and "Sources:" not in text):
        return history
    return _say(history, STOPPED)


def _final(
    history: list[Message],
    result: Result,
    suggestions: list[str],
    max_bytes: int,
    sentences: list[str] | None = None,
) -> list[Message]:
    """The finished reply; after sentences shown while the model wrote that the final reply
    does not continue (a later check failed, or it was refused), a note that they are
    withdrawn comes first."""
    content = format_result(result, max_bytes)
    if sentences and continuation(" ".join(sentences), answer_text(result))[1]:
        content = f"*{WITHDRAWN_NOTE}*\n\n{content}"
    if not suggestions:
        return _say(history, content)
    options = [{"label": s, "value": s} for s in suggestions]
    return _say(history, f"{content}\n\n{DID_YOU_MEAN}", options=options)


def respond(
    bot: Guardrag, question: str, history: list[Message] | None, kb: str | None
) -> tuple[list[Message], str, list[TrailRow]]:
    """One chat turn without streaming: (new history, the question box after it, trail rows)."""
    updates = list(chat_turn(bot, question, history, kb, {}))
    box = [shown for _, shown, *_ in updates if shown is not KEEP][-1]
    (history, _, _, rows, _, _) = updates[-1]
    return history, str(box), rows


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
    """(label, name) for each KB on disk now; the default KB alone if none can be listed."""
    try:
        summaries = kb_summaries(bot.services.store)
    except Exception:
        log.exception("cannot list knowledge bases")
        summaries = []
    choices = [
        (f"{s.name} ({s.description})" if s.description else s.name, s.name) for s in summaries
    ]
    return choices or [(bot.settings.default_kb, bot.settings.default_kb)]


def current_kb_line(choices: list[tuple[str, str]], name: str) -> str:
    label = next((label for label, value in choices if value == name), name)
    return f"You are asking: **{escape_text(label)}**"


def examples_of(bot: Guardrag, kb: str) -> list[list[str]]:
    """Example questions from the KB itself, as Dataset samples."""
    try:
        return [[q] for q in kb_examples(bot.services.store, kb)]
    except IndexUnavailable as exc:  # a KB not ingested yet: one line, not a traceback
        log.warning("no example questions: %s", exc)
        return []
    except Exception:
        log.exception("cannot read example questions of %s", kb)
        return []


@dataclass
class ChatTab:
    """The parts the app refreshes on page load and after an ingest."""

    picker: gr.Dropdown
    current: gr.Markdown
    examples: gr.Dataset

    def refresh(self, bot: Guardrag, chosen: str | None = None) -> tuple[Any, str, Any]:
        """The picker, the current-KB line and the examples as the store is now."""
        choices = kb_choices(bot)
        names = [name for _, name in choices]
        default = bot.settings.default_kb if bot.settings.default_kb in names else names[0]
        name = chosen if chosen in names else default
        return (
            gr.update(choices=choices, value=name, visible=len(choices) > 1),
            current_kb_line(choices, name),
            gr.update(samples=examples_of(bot, name)),
        )

    def follow_picker(self, bot: Guardrag) -> None:
        """A KB picked: the current-KB line and the examples follow it."""

        def on_pick(name: str) -> tuple[str, Any]:
            _, line, samples = self.refresh(bot, name)
            return line, samples

        self.picker.change(on_pick, inputs=[self.picker], outputs=[self.current, self.examples])


def _clear_handler(bot: Guardrag) -> Callable[[gr.Request], ChatUpdate]:
    def on_clear(request: gr.Request) -> ChatUpdate:
        """A new conversation: the thread's memory is forgotten with the visible chat."""
        thread = session_thread(request)
        if thread is not None:
            bot.threads.forget(thread)
        return [], "", "", [], {}, ""

    return on_clear


def _like_handler(on_feedback: FeedbackHandler) -> Callable[[dict[int, str], gr.LikeData], None]:
    def on_like(known: dict[int, str], data: gr.LikeData) -> None:
        record_feedback(on_feedback, known, data.index, data.liked)

    return on_like


def _picker(bot: Guardrag) -> tuple[gr.Dropdown, gr.Markdown, str]:
    """The KB picker (shown when there is a choice), the current-KB line, the default KB."""
    choices = kb_choices(bot)
    names = [name for _, name in choices]
    default = bot.settings.default_kb if bot.settings.default_kb in names else names[0]
    kb = gr.Dropdown(
        choices=choices, value=default, label="Knowledge base", visible=len(choices) > 1
    )
    return kb, gr.Markdown(current_kb_line(choices, default), elem_id="current-kb"), default


def _why_panel(visible: bool) -> tuple[gr.Accordion, gr.Markdown, gr.Dataframe]:
    """The operator's Why? panel: the decision in codes, and the trail as a table."""
    with gr.Accordion("Why?", open=False, elem_id="why", visible=visible) as panel:
        why = gr.Markdown(elem_id="why-text")
        trail = gr.Dataframe(
            headers=TRAIL_HEADERS,
            label="Decision trail",
            wrap=True,  # the reason is a sentence: wrapped, so threshold and ms stay in view
            column_widths=["15%", "10%", "45%", "10%", "11%", "9%"],
            elem_id="trail",
        )
    return panel, why, trail


def _ask_box(
    bot: Guardrag, default: str
) -> tuple[gr.Textbox, gr.Button, gr.Button, gr.Button, gr.Dataset]:
    """The question box, its Ask, Stop and Clear buttons, and the KB's example questions."""
    question = gr.Textbox(
        placeholder="Ask a question…", show_label=False, autofocus=True, elem_id="question"
    )
    with gr.Row():
        send = gr.Button("Ask", variant="primary", elem_id="ask")
        stop = gr.Button("Stop", elem_id="stop")
        clear = gr.Button("Clear", elem_id="clear")
    examples = gr.Dataset(
        components=[question], samples=examples_of(bot, default), label="Try", elem_id="examples"
    )
    return question, send, stop, clear, examples


def chat_tab(
    bot: Guardrag,
    recent: RecentResults,
    on_feedback: FeedbackHandler,
    delay_s: float,
    operator: Operator,
) -> ChatTab:
    """The chat tab; returns the parts that follow the KBs on disk."""
    kb, current, default = _picker(bot)
    chat = gr.Chatbot(label="Chat", height=460, elem_id="chat")
    ids = gr.State({})
    shown = gr.HTML(elem_id="route-badge")
    open_why = operator.expected is None  # the trusted demo: everyone is the operator
    why_panel, why, trail = _why_panel(open_why)
    question, send, stop, clear, examples = _ask_box(bot, default)
    outputs = [chat, question, shown, trail, ids, why]
    stops = StopRequests()

    def is_operator(session: str | None) -> bool:
        return open_why or operator.ok(session)

    def on_submit(
        text: str,
        history: list[Message] | None,
        name: str | None,
        known: dict[int, str],
        session: str,
        request: gr.Request,
    ) -> Iterator[ChatUpdate]:
        thread, shown_why = session_thread(request), is_operator(session)
        turn = chat_turn(
            bot, text, history, name, known, recent=recent, delay_s=delay_s, thread_id=thread,
            operator=shown_why,
        )  # fmt: skip
        yield from stops.guard(thread, turn)

    def on_stop(history: list[Message] | None, request: gr.Request) -> list[Message]:
        stops.stop(session_thread(request))
        return stopped(history)

    def on_option(
        history: list[Message] | None,
        name: str | None,
        known: dict[int, str],
        session: str,
        data: gr.SelectData,
        request: gr.Request,
    ) -> Iterator[ChatUpdate]:
        """A "did you mean" entry clicked: ask it."""
        yield from on_submit(str(data.value), history, name, known, session, request)

    inputs = [question, chat, kb, ids, operator.session]
    # A question sent while the last answer is still coming is answered next, not dropped.
    asking = gr.on(
        [question.submit, send.click],
        on_submit,
        inputs=inputs,
        outputs=outputs,
        api_name="ask",
        trigger_mode="always_last",
    )
    picking = chat.option_select(
        on_option, inputs=[chat, kb, ids, operator.session], outputs=outputs
    )
    stop.click(on_stop, inputs=[chat], outputs=[chat], cancels=[asking, picking], queue=False).then(
        _settle_stop, inputs=[chat], outputs=[chat], queue=False
    )
    chat.like(_like_handler(on_feedback), inputs=[ids], outputs=None)
    clear.click(_clear_handler(bot), outputs=outputs)
    examples.click(lambda sample: sample[0], inputs=[examples], outputs=[question])
    tab = ChatTab(kb, current, examples)
    tab.follow_picker(bot)
    operator.then(
        lambda session: gr.update(visible=is_operator(session)),
        inputs=[operator.session],
        outputs=[why_panel],
    )
    return tab
