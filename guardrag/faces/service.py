"""The product's Python entry point: build services once, ask questions, get Result objects.

The CLI, batch, Gradio app and notebooks all go through `Guardrag`, so they behave the same.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.types import Durability

# The guard framework before the guards' rule modules: imported after them, guardrails-ai
# took ~25 ms longer (`guardrag ask`, 6 runs each way). Ingest never imports this module.
import guardrag.core.guards.framework  # noqa: F401
from guardrag.config.run_config import RunConfig
from guardrag.config.settings import Settings, load_settings, validate_kb_name
from guardrag.contract import Outcome, Refusal, Result, Usage
from guardrag.core import metrics
from guardrag.core.audit import AuditSink
from guardrag.core.classify import DomainClassifier
from guardrag.core.embedder import Embedder, load_embedder
from guardrag.core.guards import InputGuard, OutputGuard
from guardrag.core.guards.shared.learned import installed_reader
from guardrag.core.llm.client import load_chat_model, model_name
from guardrag.core.rerank import Reranker, load_reranker
from guardrag.core.second_opinion import SecondOpinion, load_second_opinion
from guardrag.core.store import VectorStore, store_from_settings
from guardrag.faces.threads import ThreadStore, open_thread_store, threads_url, validate_thread_id
from guardrag.graph.builder import build_graph
from guardrag.graph.context import Services

NO_CHECKPOINT: Durability | None = None
#: Hears (node name, the node's state update) as each node of a run finishes.
StepHandler = Callable[[str, dict[str, Any]], None]
#: Hears (node name, model call id, text) for each piece of text a chat model streams in a node.
TokenHandler = Callable[[str, str, str], None]
log = logging.getLogger("guardrag")


def build_services(
    settings: Settings,
    *,
    store: VectorStore | None = None,
    embedder: Embedder | None = None,
    chat_model: BaseChatModel | None = None,
    reranker: Reranker | None = None,
    second_opinion: SecondOpinion | None = None,
) -> Services:
    """Real services from settings; tests pass fakes for any of them."""
    embedder = embedder or load_embedder()
    if second_opinion is None and settings.second_opinion:
        second_opinion, missing = load_second_opinion(settings)
        if missing:
            log.info("rerank decides unsure rankings without a second opinion: %s", missing)
    return Services(
        store=store or store_from_settings(settings),
        embedder=embedder,
        input_guard=InputGuard(
            embedder=embedder, pii=settings.pii_mode, reader=installed_reader(settings)
        ),
        output_guard=OutputGuard(),
        domain=DomainClassifier(embedder),
        reranker=reranker or load_reranker(settings),
        chat_model=chat_model if chat_model is not None else load_chat_model(settings),
        model_name=model_name(settings),
        second_opinion=second_opinion,
    )


class Guardrag:
    """Answers questions from one or more knowledge bases through the guarded graph.

    With an audit sink, every result is recorded (redacted, append-only) without slowing or
    failing the request.
    """

    def __init__(
        self, services: Services, settings: Settings | None = None, audit: AuditSink | None = None
    ) -> None:
        self.services = services
        self.settings = settings or load_settings()
        self.audit = audit
        self.graph = build_graph()
        self._threads: ThreadStore | None = None
        self._threads_lock = threading.Lock()

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None = None,
        *,
        audit: bool = True,
        source: str = "python",
        **overrides: Any,
    ) -> Guardrag:
        """Real services from settings; `source` names the entry point in the audit log."""
        settings = settings or load_settings()
        sink = AuditSink.from_settings(settings, source=source) if audit else None
        return cls(build_services(settings, **overrides), settings, sink)

    def with_services(self, **changes: Any) -> Guardrag:
        return Guardrag(replace(self.services, **changes), self.settings, self.audit)

    def knobs_for(self, knobs: dict[str, Any] | None) -> dict[str, Any]:
        """A question's knobs over this deployment's defaults (`GUARDRAG_KNOBS`)."""
        return {**self.settings.knobs, **(knobs or {})}

    def ask(
        self,
        question: str,
        kb: str | None = None,
        *,
        row_id: str | None = None,
        knobs: dict[str, Any] | None = None,
        thread_id: str | None = None,
        on_step: StepHandler | None = None,
        on_token: TokenHandler | None = None,
    ) -> Result:
        """Run one question through the pipeline; never raises for a bad question.

        With a `thread_id`, the question continues that conversation: a follow-up is rewritten
        into a standalone question from the thread's recent turns (kept in SQLite). `on_step`
        hears each node's update as the node finishes (the faces show progress with it);
        `on_token` (with `on_step`) hears the chat model's text as it is generated.
        """
        kb = validate_kb_name(kb or self.settings.default_kb)
        knobs = self.knobs_for(knobs)
        result, _ = self.run(
            question,
            kb,
            row_id=row_id,
            knobs=knobs,
            thread_id=thread_id,
            on_step=on_step,
            on_token=on_token,
        )
        metrics.observe(result)
        if self.audit:
            self.audit.record(
                result,
                kb=kb,
                knobs=knobs,
                models=self.services.model_names(),
                snapshot_id=self.services.snapshot_id(kb),
                thread_id=thread_id,
            )
        return result

    def run(
        self,
        question: str,
        kb: str,
        *,
        row_id: str | None = None,
        knobs: dict[str, Any] | None = None,
        thread_id: str | None = None,
        on_step: StepHandler | None = None,
        on_token: TokenHandler | None = None,
    ) -> tuple[Result, dict[str, Any]]:
        """The result and the graph's final state, recorded nowhere (evaluation uses this).

        Raises KnobError for a knob that does not exist or a value out of its range.
        """
        knobs = self.knobs_for(knobs)
        RunConfig.checked(knobs)
        request_id = str(uuid.uuid4())
        start = time.perf_counter()
        config: Any = {
            "configurable": {**(knobs or {})},
            "run_name": "guardrag",
            "run_id": request_id,
        }
        graph, durability = self.graph, NO_CHECKPOINT
        turn: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if thread_id is not None:
            graph, durability = self.threads.graph, "exit"  # keep only each turn's final state
            config["configurable"]["thread_id"] = validate_thread_id(thread_id)
            turn = self.threads.turn(thread_id)  # one turn of a thread at a time, any replica
        with turn:
            state = self._invoke(
                graph, {"question": question, "kb": kb}, config, durability, on_step, on_token
            )
        ms = (time.perf_counter() - start) * 1000
        return to_result(state, question, request_id, row_id, ms, thread_id=thread_id), state

    def _invoke(
        self,
        graph: Any,
        inputs: dict[str, Any],
        config: Any,
        durability: Durability | None,
        on_step: StepHandler | None,
        on_token: TokenHandler | None = None,
    ) -> dict[str, Any]:
        """The graph's final state; with `on_step`, read from LangGraph's stream so that each
        node's update is handed on the moment the node finishes (and, with `on_token`, the
        chat model's text as it is generated: LangGraph's "messages" mode)."""
        if on_step is None:
            state: dict[str, Any] = graph.invoke(
                inputs, config, context=self.services, durability=durability
            )
            return state
        state = {}
        modes: list[Any] = ["updates", "values", *(["messages"] if on_token else [])]
        for mode, chunk in graph.stream(
            inputs, config, context=self.services, durability=durability, stream_mode=modes
        ):
            if mode == "values":
                state = chunk
                continue
            if mode == "messages":
                message, meta = chunk
                text = message.content if isinstance(message.content, str) else ""
                if on_token is not None and text:
                    node = str(meta.get("langgraph_node", ""))
                    try:
                        on_token(node, str(message.id or ""), text)
                    except Exception:  # a listener's failure must not fail the question
                        log.exception("token listener failed at %s", node)
                continue
            for node, update in chunk.items():
                try:
                    on_step(node, update or {})
                except Exception:  # a listener's failure must not fail the question
                    log.exception("progress listener failed at %s", node)
        return state

    def warm_up(self) -> threading.Thread:
        """Computes every KB's statistics in the background, so a long-running app's first
        question does not wait for them (seconds on a large KB: docs/BENCHMARKS.md)."""

        def run() -> None:
            store, stats = self.services.store, self.services.kb_stats
            for name in store.list_kbs():
                try:
                    if (info := store.kb_info(name)) is not None:
                        stats.get(store, name, info.snapshot_id)
                except Exception as exc:  # the first question will say what is wrong
                    log.warning("warm-up of kb %r failed: %s", name, exc)

        thread = threading.Thread(target=run, name="guardrag-warm-up", daemon=True)
        thread.start()
        return thread

    @property
    def threads(self) -> ThreadStore:
        """Conversation memory, opened on first use (GUARDRAG_THREADS_URL, see threads_url)."""
        with self._threads_lock:  # concurrent first turns must not open two stores
            if self._threads is None:
                self._threads = open_thread_store(threads_url(self.settings))
        return self._threads

    def feedback(self, request_id: str, score: int, comment: str = "") -> None:
        """A user's thumbs up (1) or down (-1) on an answer, kept with its audit record."""
        if self.audit:
            self.audit.feedback(request_id, score, comment)

    def ask_many(
        self,
        rows: Sequence[tuple[str | None, str]],
        kb: str | None = None,
        *,
        concurrency: int = 1,
        knobs: dict[str, Any] | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Iterator[Result]:
        """Results for (row id, question) pairs, in input order, `concurrency` at a time."""

        def one(row: tuple[str | None, str]) -> Result:
            result = self.ask(row[1], kb, row_id=row[0], knobs=knobs)
            if on_done:
                on_done()
            return result

        if concurrency <= 1:
            yield from map(one, rows)
            return
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            yield from pool.map(one, rows)

    def close(self) -> None:
        if self.audit:
            self.audit.close()
        if self._threads is not None:
            self._threads.close()
        self.services.store.close()


def _outcome(state: dict[str, Any]) -> Outcome:
    """Choices offered (a not-found refusal with close entries), refused, or answered."""
    if state.get("choices"):
        return "choices"
    return "refused" if state.get("refusal") else "answered"


def to_result(
    state: dict[str, Any],
    question: str,
    request_id: str,
    row_id: str | None,
    ms: float,
    thread_id: str | None = None,
) -> Result:
    refusal: Refusal | None = state.get("refusal")
    return Result(
        id=row_id,
        question=question,
        request_id=request_id,
        thread_id=thread_id,
        outcome=_outcome(state),
        route=None if refusal else state.get("route"),
        refusal=refusal,
        answer=state.get("answer", ""),
        citations=[] if refusal else state.get("citations", []),
        choices=state.get("choices") or [],
        uncovered=[] if refusal else state.get("uncovered", []),
        confidence=0.0 if refusal else float(state.get("confidence", 0.0)),
        trail=state.get("trail", []),
        usage=state.get("usage") or Usage(),
        latency_ms=round(ms, 3),
    )
