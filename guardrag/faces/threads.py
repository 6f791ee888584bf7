"""Conversation memory: a LangGraph checkpointer behind the pipeline, one row set a thread.

SQLite (a file in DATA_DIR) for one host, or Postgres (GUARDRAG_THREADS_URL, else a Postgres
GUARDRAG_AUDIT_URL) so that a conversation started on one replica continues on another.
Each turn stores only the final state of its run (`durability="exit"`) and older checkpoints
of the thread are pruned, so a thread carries just its recent `history`. Turns of one thread
are serialised (`turn()`), in this process and across processes: two concurrent turns would
each extend the same old history and one of them would be lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph

from guardrag.contract import Citation, Decision, GuardragError, Refusal, RefusalReason, Usage
from guardrag.graph.builder import build_graph
from guardrag.graph.state import Candidate, Turn

if TYPE_CHECKING:
    from guardrag.config.settings import Settings

log = logging.getLogger("guardrag.threads")

#: The only classes a checkpoint may rebuild: a tampered database cannot construct anything else.
STATE_TYPES = (Candidate, Citation, Decision, Refusal, RefusalReason, Usage)
#: A caller's conversation id (the API and UI prefix their own namespace to it).
THREAD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
_THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,159}$")
_POSTGRES = ("postgresql://", "postgres://")
#: Turn-lock stripes of the SQLite store (threads hashing alike wait for each other briefly).
_STRIPES = 256
#: Postgres connections a process keeps for checkpoints, and for turns in progress.
_POOL_SIZE = 8
#: Seconds a turn waits for a free connection before it fails (a stuck database).
_POOL_TIMEOUT_S = 5.0
#: Advisory lock key under which replicas starting together create the tables one at a time.
_SETUP_LOCK = 4716


class ThreadError(GuardragError, ValueError):
    """A thread id that cannot name a conversation."""


class ThreadStoreUnavailable(GuardragError, RuntimeError):
    """The conversation store cannot be opened (driver missing, server unreachable)."""


def validate_thread_id(thread_id: str) -> str:
    if not _THREAD_ID.match(thread_id):
        raise ThreadError(
            f"thread id {thread_id[:40]!r} is not valid: use 1-160 letters, digits, '_', '.', "
            "':' or '-', starting with a letter or digit"
        )
    return thread_id


def _stripe(thread_id: str) -> int:
    return int.from_bytes(hashlib.sha256(thread_id.encode()).digest()[:4], "big") % _STRIPES


class ThreadStore:
    """The pipeline compiled with a checkpointer; subclasses say where checkpoints live."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = build_graph(saver)

    @staticmethod
    def serde() -> JsonPlusSerializer:
        return JsonPlusSerializer(allowed_msgpack_modules=STATE_TYPES)

    def history(self, thread_id: str) -> list[Turn]:
        """The turns a thread remembers, oldest first (empty for a new thread)."""
        config: Any = {"configurable": {"thread_id": validate_thread_id(thread_id)}}
        snapshot = self.graph.get_state(config)
        return list(snapshot.values.get("history") or [])

    @contextmanager
    def turn(self, thread_id: str) -> Iterator[None]:
        """Hold the conversation for one turn (read history, run, write), then prune its
        older checkpoints: only the latest is ever read."""
        validate_thread_id(thread_id)
        with self._lock(thread_id):
            yield
            self._prune(thread_id)

    def forget(self, thread_id: str) -> None:
        """Deletes a thread's memory (the user's "new conversation")."""
        self.saver.delete_thread(validate_thread_id(thread_id))

    def close(self) -> None:
        raise NotImplementedError

    def _lock(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def _prune(self, thread_id: str) -> None:
        self.saver.prune([thread_id], strategy="keep_latest")


class _TurnLocks:
    """Turn locks on one SQLite file, shared by every store of this process on that file.

    A striped thread lock, then a `lockf` byte-range lock on `<file>.locks` for other
    processes. Record locks belong to a process, and closing any descriptor of the file drops
    all of them, so there is one descriptor a file a process, and one set of stripes.
    """

    _open: ClassVar[dict[Path, _TurnLocks]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(f"{path}.locks", os.O_RDWR | os.O_CREAT, 0o600)
        self.stripes = [threading.Lock() for _ in range(_STRIPES)]
        self.setup = threading.Lock()
        self.users = 0

    @classmethod
    def acquire(cls, path: Path) -> _TurnLocks:
        with cls._registry_lock:
            locks = cls._open.get(path) or cls._open.setdefault(path, cls(path))
            locks.users += 1
            return locks

    def release(self) -> None:
        with self._registry_lock:
            self.users -= 1
            if self.users == 0:
                del self._open[self.path]
                os.close(self.fd)

    @contextmanager
    def hold(self, thread_id: str) -> Iterator[None]:
        stripe = _stripe(thread_id)
        with self.stripes[stripe], self._byte(stripe):
            yield

    @contextmanager
    def opening(self) -> Iterator[None]:
        """Held while a store switches the file to WAL and creates its tables: SQLite answers
        a journal-mode change that races another connection's with "database is locked" at
        once, without waiting (two replicas, or `serve --workers N`, starting together)."""
        with self.setup, self._byte(_STRIPES):
            yield

    @contextmanager
    def _byte(self, offset: int) -> Iterator[None]:
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, offset)
        try:
            yield
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, offset)


class SqliteThreadStore(ThreadStore):
    """Checkpoints in one SQLite file (WAL), shared by threads and by processes on this host
    (`guardrag serve --workers N`), with turns serialised across both."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, timeout=10)
        self._turn_locks = _TurnLocks.acquire(path.resolve())
        try:
            with self._turn_locks.opening():
                self._conn.execute("PRAGMA journal_mode=WAL")
                saver = SqliteSaver(self._conn, serde=self.serde())
                saver.setup()
        except BaseException:  # nothing of a store that did not open stays open
            self._conn.close()
            self._turn_locks.release()
            raise
        super().__init__(saver)

    def _lock(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        return self._turn_locks.hold(thread_id)

    def _prune(self, thread_id: str) -> None:
        # SqliteSaver has no prune(): keep the newest checkpoint of each namespace (ids are
        # time-ordered UUIDs; the saver reads the greatest) and the writes that belong to it.
        assert isinstance(self.saver, SqliteSaver)
        with self.saver.cursor() as cursor:
            for table in ("checkpoints", "writes"):
                cursor.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ("
                    "SELECT MAX(checkpoint_id) FROM checkpoints AS latest "
                    f"WHERE latest.thread_id = {table}.thread_id "
                    f"AND latest.checkpoint_ns = {table}.checkpoint_ns)",
                    (thread_id,),
                )

    def close(self) -> None:
        self._conn.close()
        self._turn_locks.release()


class PostgresThreadStore(ThreadStore):
    """Checkpoints in Postgres (LangGraph's PostgresSaver with the same allow-list serde).

    Two small pools a process: one for the saver, one holding a session advisory lock per
    turn in progress (apart, so turns holding locks can never starve the saver). A connection
    the server dropped is replaced when it is next taken.
    """

    def __init__(self, url: str) -> None:
        try:
            # lazy: the Postgres driver and saver load only for a Postgres URL
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise ThreadStoreUnavailable(
                "conversations on Postgres need the postgres extra: "
                "pip install 'guardrag[postgres]'"
            ) from None
        # The saver reads rows by column name; setup() runs CREATE INDEX CONCURRENTLY, which
        # needs autocommit; no prepared statements, so a transaction pooler (PgBouncer) works.
        options: dict[str, Any] = {
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "connect_timeout": 5,
        }
        pools: list[Any] = []
        try:
            # One plain connection first: an unreachable server fails here at once, not after
            # a pool's retries; it creates the tables, then goes.
            with psycopg.connect(url, **options) as conn:
                saver = PostgresSaver(conn, serde=self.serde())
                _setup_alone(conn, saver.setup)
            for name in ("guardrag-threads", "guardrag-turns"):
                pool = ConnectionPool(
                    url,
                    min_size=1,
                    max_size=_POOL_SIZE,
                    kwargs=options,
                    check=ConnectionPool.check_connection,
                    timeout=_POOL_TIMEOUT_S,
                    name=name,
                    open=False,
                )
                pools.append(pool)
                pool.open(wait=True, timeout=10)
        except Exception as exc:
            for pool in pools:
                pool.close()
            if isinstance(exc, GuardragError):
                raise
            raise ThreadStoreUnavailable(
                f"conversation store on Postgres cannot be opened: {type(exc).__name__}: {exc}"
            ) from exc
        self._pool, self._turns = pools
        super().__init__(PostgresSaver(self._pool, serde=self.serde()))

    def _lock(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        return self._advisory_lock(thread_id)

    @contextmanager
    def _advisory_lock(self, thread_id: str) -> Iterator[None]:
        with self._turns.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (thread_id,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (thread_id,))

    def close(self) -> None:
        self._pool.close()
        self._turns.close()


def _setup_alone(conn: Any, setup: Callable[[], None], wait_s: float = 60.0) -> None:
    """Run the saver's migrations while no other process runs them. The lock is polled, not
    waited for: a waiting statement holds a snapshot, and the migrations' CREATE INDEX
    CONCURRENTLY would wait for that snapshot while its owner waits for the lock."""
    deadline = time.monotonic() + wait_s
    taken = "SELECT pg_try_advisory_lock(%s) AS taken"  # rows are dicts on these connections
    while not conn.execute(taken, (_SETUP_LOCK,)).fetchone()["taken"]:
        if time.monotonic() > deadline:
            raise ThreadStoreUnavailable(
                f"another process has been creating the conversation tables for {wait_s:.0f} s"
            )
        time.sleep(0.05)
    try:
        setup()
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))


def threads_url(settings: Settings) -> str:
    """GUARDRAG_THREADS_URL; else the audit URL when that is Postgres; else DATA_DIR's file."""
    if settings.threads_url:
        return settings.threads_url
    if settings.audit_url and settings.audit_url.startswith(_POSTGRES):
        return settings.audit_url
    return str(Path(settings.data_dir) / "threads.sqlite")


def open_thread_store(url: str) -> ThreadStore:
    """A store from a URL: `postgresql://...`, `sqlite:///path`, or a plain file path."""
    if url.startswith(_POSTGRES):
        return PostgresThreadStore(url)
    return SqliteThreadStore(Path(url.removeprefix("sqlite:///")))
