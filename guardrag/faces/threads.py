"""Conversation memory: LangGraph's SQLite checkpointer behind the pipeline, one row set a thread.

Each turn stores only the final state of its run (`durability="exit"`); `start_turn` clears the
working state at the start of the next one, so a thread carries just its recent `history`.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph

from guardrag.contract import Citation, Decision, GuardragError, Refusal, RefusalReason, Usage
from guardrag.graph.builder import build_graph
from guardrag.graph.state import Candidate, Turn

#: The only classes a checkpoint may rebuild: a tampered database cannot construct anything else.
STATE_TYPES = (Candidate, Citation, Decision, Refusal, RefusalReason, Usage)
#: A caller's conversation id (the API and UI prefix their own namespace to it).
THREAD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
_THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,159}$")


class ThreadError(GuardragError, ValueError):
    """A thread id that cannot name a conversation."""


def validate_thread_id(thread_id: str) -> str:
    if not _THREAD_ID.match(thread_id):
        raise ThreadError(
            f"thread id {thread_id[:40]!r} is not valid: use 1-160 letters, digits, '_', '.', "
            "':' or '-', starting with a letter or digit"
        )
    return thread_id


class ThreadStore:
    """The pipeline compiled with a SQLite checkpointer at `path` (WAL, shared by threads)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, timeout=10)
        self._conn.execute("PRAGMA journal_mode=WAL")
        serde = JsonPlusSerializer(allowed_msgpack_modules=STATE_TYPES)
        self.saver = SqliteSaver(self._conn, serde=serde)
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = build_graph(self.saver)

    def history(self, thread_id: str) -> list[Turn]:
        """The turns a thread remembers, oldest first (empty for a new thread)."""
        config: Any = {"configurable": {"thread_id": validate_thread_id(thread_id)}}
        snapshot = self.graph.get_state(config)
        return list(snapshot.values.get("history") or [])

    def forget(self, thread_id: str) -> None:
        """Deletes a thread's memory (the user's "new conversation")."""
        self.saver.delete_thread(validate_thread_id(thread_id))

    def close(self) -> None:
        self._conn.close()
