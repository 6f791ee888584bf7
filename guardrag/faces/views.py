"""What the faces show alike: knowledge-base summaries, recent results, answers in pieces,
progress while a question runs, "did you mean" entries, and the audit guarantee."""

from __future__ import annotations

import itertools
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote, urlparse

from pydantic import BaseModel

from guardrag.contract import RefusalReason, Result
from guardrag.core.audit import AuditUnavailable
from guardrag.core.store import VectorStore
from guardrag.faces.service import Guardrag

_WORDS = re.compile(r"\s*\S+")
_URL_SAFE = ":/?#@!$&*+,;=%-._~"
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#|!])")


class KBSummary(BaseModel):
    """One knowledge base as listed by GET /v1/kbs and the UI's Knowledge base tab."""

    name: str
    description: str = ""
    entries: int = 0
    snapshot_id: str = ""
    updated_at: str = ""


def kb_summaries(store: VectorStore, allowed: frozenset[str] | None = None) -> list[KBSummary]:
    """Every published KB of `store` (of `allowed` only, unless None), by name."""
    summaries = []
    for name in sorted(store.list_kbs()):
        if allowed is not None and name not in allowed:
            continue
        info = store.kb_info(name)
        if info is not None:
            summaries.append(
                KBSummary(
                    name=name,
                    description=info.description,
                    entries=info.count,
                    snapshot_id=info.snapshot_id,
                    updated_at=info.updated_at,
                )
            )
    return summaries


class Entry(BaseModel):
    """One knowledge-base entry as a browser shows it (the text is the KB's, unescaped)."""

    source_id: str
    kind: str
    title: str
    text: str
    url: str | None = None
    category: str | None = None


def kb_entries(store: VectorStore, kb: str, offset: int = 0, limit: int = 20) -> list[Entry]:
    """Entries `offset` .. `offset + limit` of a KB, in the store's order (read lazily: the
    rest of a large KB is never fetched)."""
    payloads = iter(store.payloads(kb))
    try:
        window = list(itertools.islice(payloads, offset, offset + limit))
    finally:
        close = getattr(payloads, "close", None)
        if close is not None:  # a generator: let go of the shard it holds
            close()
    return [
        Entry(
            source_id=str(p.get("source_id", "")),
            kind=str(p.get("kind", "")),
            title=str(p.get("title", "")),
            text=str(p.get("text", "")),
            url=p.get("url"),
            category=p.get("category"),
        )
        for p in window
    ]


#: How many example questions the chat offers, and how many entries are read to pick them.
EXAMPLES = 4
_EXAMPLE_POOL = 400


def kb_examples(store: VectorStore, kb: str, count: int = EXAMPLES) -> list[str]:
    """Example questions from the KB itself: FAQ questions from as many categories as there
    are, short ones first within each (read from the first few hundred entries only)."""
    by_category: dict[str, list[str]] = {}
    for entry in kb_entries(store, kb, 0, _EXAMPLE_POOL):
        if entry.kind == "faq" and entry.title and len(entry.title) <= 90:
            by_category.setdefault(entry.category or "", []).append(entry.title)
    queues = [sorted(titles, key=len) for titles in by_category.values()]
    picked: list[str] = []
    while queues and len(picked) < count:
        for queue in list(queues):
            picked.append(queue.pop(0))
            if not queue:
                queues.remove(queue)
            if len(picked) == count:
                break
    return picked


def answer_chunks(text: str, words: int = 3) -> list[str]:
    """`text` cut into pieces of a few words each (leading whitespace kept), for a streamed feel."""
    tokens = _WORDS.findall(text)
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]


def safe_url(url: str | None) -> str | None:
    """The URL percent-encoded for a markdown link, or None unless it is plain http(s)."""
    if not url:
        return None
    parsed = urlparse(url.strip())
    if parsed.scheme.lower() not in ("http", "https") or not parsed.netloc:
        return None
    return quote(url.strip(), safe=_URL_SAFE)


def citation_lines(result: Result) -> list[str]:
    """The citations as numbered markdown lines, `[1] [title](url)` (a plain title when the
    URL is not http(s)); titles escaped so KB text cannot make links of its own."""
    lines = []
    for number, citation in enumerate(result.citations, start=1):
        title = _MARKDOWN_SPECIAL.sub(r"\\\1", citation.title or citation.source_id)
        url = safe_url(citation.url)
        lines.append(f"[{number}] [{title}]({url})" if url else f"[{number}] {title}")
    return lines


@dataclass(frozen=True)
class Recorded:
    """A result and when it was answered (UTC)."""

    at: datetime
    result: Result


class RecentResults:
    """The last `size` results, in memory, newest first (the Audit tab's source until the
    persistent audit store plugs in). Thread-safe: API workers and UI events both add."""

    def __init__(self, size: int = 200) -> None:
        self._items: deque[Recorded] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, result: Result) -> None:
        with self._lock:
            self._items.appendleft(Recorded(datetime.now(UTC), result))

    def items(self) -> list[Recorded]:
        with self._lock:
            return list(self._items)

    def get(self, request_id: str) -> Recorded | None:
        return next((r for r in self.items() if r.result.request_id == request_id), None)


# --- progress while the pipeline runs ---------------------------------------------------

Stage = Literal["checking", "guards_passed", "searching", "drafting", "verifying", "done"]

#: What a customer reads while waiting, by stage: no node names, no reason codes.
STAGE_LABELS: dict[Stage, str] = {
    "checking": "Checking your question…",
    "guards_passed": "Question checked. Looking it up…",
    "searching": "Searching the help centre…",
    "drafting": "Drafting an answer from the help articles…",
    "verifying": "Checking the answer against the sources…",
    "done": "Done.",
}
#: The stage that starts when a node finishes with a passing verdict.
_NEXT_STAGE: dict[str, Stage] = {
    "start_turn": "checking",
    "moderate_input": "guards_passed",
    "contextualize": "guards_passed",
    "classify": "searching",
    "exact_match": "searching",
    "retrieve": "searching",
    "rephrase": "searching",
    "rerank": "drafting",
    "generate": "verifying",
    "ground": "verifying",
    "moderate_output": "verifying",
    "respond": "done",
    "refuse": "done",
}


class Progress(BaseModel):
    """One step of a running question: which node finished, and the stage that starts now."""

    node: str
    verdict: str = ""
    stage: Stage
    label: str


def progress_of(node: str, update: dict[str, Any]) -> Progress | None:
    """The progress event for a node's state update (None for nodes outside the pipeline)."""
    stage = _NEXT_STAGE.get(node)
    if stage is None:
        return None
    trail = update.get("trail") or []
    verdict = str(getattr(trail[-1], "verdict", "")) if trail else ""
    if update.get("refusal") is not None:
        stage = "done"  # refused: the reply is being written, nothing else runs
    elif verdict == "hit":
        stage = "verifying"  # an FAQ entry was found: only the output check is left
    return Progress(node=node, verdict=verdict, stage=stage, label=STAGE_LABELS[stage])


# --- did you mean -----------------------------------------------------------------------

#: Refusals after which close KB entries are offered: the help centre had something near.
SUGGEST_AFTER = frozenset(
    {RefusalReason.NO_RELEVANT_DOCS, RefusalReason.LOW_CONFIDENCE, RefusalReason.NOT_GROUNDED}
)
#: How close (cosine of the question to the entry's question) an entry must be to be offered.
SUGGEST_MIN_SIMILARITY = 0.45
SUGGEST_MAX = 3


@dataclass
class Asked:
    """A finished question as the faces see it: the result, and what it passed on the way."""

    result: Result
    candidates: list[Any] = field(default_factory=list)

    def suggestions(self, limit: int = SUGGEST_MAX) -> list[str]:
        """Up to `limit` FAQ questions of the KB close to a not-found question ("Did you
        mean ..."), best first; none after any other outcome."""
        refusal = self.result.refusal
        if refusal is None or refusal.reason not in SUGGEST_AFTER:
            return []
        found: list[str] = []
        ranked = sorted(self.candidates, key=lambda c: -float(getattr(c, "dense", 0.0)))
        for candidate in ranked:
            payload = getattr(candidate, "payload", {}) or {}
            title = str(payload.get("question") or "").strip()
            close = float(getattr(candidate, "dense", 0.0)) >= SUGGEST_MIN_SIMILARITY
            if payload.get("kind") == "faq" and title and close and title not in found:
                found.append(title)
            if len(found) == limit:
                break
        return found


def ask_with_progress(
    bot: Guardrag,
    question: str,
    kb: str | None,
    *,
    thread_id: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> Asked:
    """`bot.ask` that reports progress as nodes finish and keeps the candidates it ranked."""
    candidates: list[Any] = []

    def step(node: str, update: dict[str, Any]) -> None:
        if update.get("candidates"):
            candidates[:] = update["candidates"]
        event = progress_of(node, update)
        if event is not None and on_progress is not None:
            on_progress(event)

    result = bot.ask(question, kb, thread_id=thread_id, on_step=step)
    return Asked(result, candidates)


# --- the audit guarantee ----------------------------------------------------------------

#: How long a face waits for a request's audit record to be written or spooled.
AUDIT_CONFIRM_S = 10.0


def ensure_audited(bot: Guardrag, result: Result, timeout: float = AUDIT_CONFIRM_S) -> None:
    """Return once `result`'s audit record is in the store or the spool; raise
    AuditUnavailable when it is neither (only in memory, or not within `timeout`), unless the
    operator chose GUARDRAG_AUDIT_BEST_EFFORT. A bot without an audit log passes."""
    if bot.audit is None or bot.settings.audit_best_effort:
        return
    fate = bot.audit.confirm(result.request_id, timeout)
    if fate not in ("written", "spooled"):
        raise AuditUnavailable(
            "the audit log could not record this request (store and spool both failing), so "
            "it is not answered; operators: see the log, or set GUARDRAG_AUDIT_BEST_EFFORT"
        )
