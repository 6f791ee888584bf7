"""What the faces show alike: knowledge-base summaries, recent results, answers in pieces."""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel

from guardrag.contract import Result
from guardrag.core.store import VectorStore

_WORDS = re.compile(r"\s*\S+")


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


def answer_chunks(text: str, words: int = 3) -> list[str]:
    """`text` cut into pieces of a few words each (leading whitespace kept), for a streamed feel."""
    tokens = _WORDS.findall(text)
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]


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
