"""What the faces show alike: knowledge-base summaries, entries and example questions,
recent results, answers in pieces, citations as links."""

from __future__ import annotations

import itertools
import re
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlparse

from pydantic import BaseModel

from guardrag.contract import Result
from guardrag.core.store import VectorStore

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
        title = _MARKDOWN_SPECIAL.sub(
            r"\\\1", citation.label or citation.title or citation.source_id
        )
        url = safe_url(citation.url)
        lines.append(f"[{number}] [{title}]({url})" if url else f"[{number}] {title}")
    return lines


@dataclass(frozen=True)
class Recorded:
    """A result and when it was answered (UTC)."""

    at: datetime
    result: Result
    kb: str = ""


class RecentResults:
    """The last `size` results, in memory, newest first (the Audit tab's source until the
    persistent audit store plugs in). Thread-safe: API workers and UI events both add."""

    def __init__(self, size: int = 200) -> None:
        self._items: deque[Recorded] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, result: Result, kb: str = "") -> None:
        with self._lock:
            self._items.appendleft(Recorded(datetime.now(UTC), result, kb))

    def items(self) -> list[Recorded]:
        with self._lock:
            return list(self._items)

    def get(self, request_id: str) -> Recorded | None:
        return next((r for r in self.items() if r.result.request_id == request_id), None)
