"""The audit store: an append-only log of requests, their decisions and user feedback.

SQLite (WAL) by default, one file beside the index, safe for many threads and processes;
a `postgresql://` URL for several replicas (needs `psycopg`). Both speak the same small
SQL, so everything above `_connect` and `_migrate_lock` is shared.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from guardrag.contract import GuardragError
from guardrag.core.audit.migrations import (
    MIGRATIONS,
    MIGRATIONS_TABLE,
    Dialect,
    Migration,
    pending,
)
from guardrag.core.audit.record import AuditRecord, FeedbackRecord, now_iso

_REQUEST_FIELDS = tuple(AuditRecord.model_fields)
_DECISION_FIELDS = (
    "request_id",
    "position",
    "node",
    "verdict",
    "reason",
    "score",
    "threshold",
    "ms",
)
_FEEDBACK_FIELDS = tuple(FeedbackRecord.model_fields)
#: A request id prefix shorter than this is too ambiguous to look up.
MIN_PREFIX = 6


class AuditUnavailable(GuardragError, RuntimeError):
    """The audit store cannot be opened or written (locked, full, unreachable)."""


def _insert(table: str, columns: Sequence[str], key: str) -> str:
    # Idempotent by key: a spooled record flushed twice (crash between commit and spool
    # truncation) is stored once.
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
        f"ON CONFLICT ({key}) DO NOTHING"
    )


class SqlAuditStore:
    """Shared SQL of both backends; subclasses open connections and lock migrations."""

    dialect: Dialect = "sqlite"

    def __init__(self, url: str, migrations: tuple[Migration, ...] = MIGRATIONS) -> None:
        self.url = url
        self._lock = threading.RLock()
        self._conn: Any = self._connect()
        try:
            self.migrate(migrations)
        except BaseException:
            self._conn.close()
            raise

    # -- backend specifics -------------------------------------------------------------
    def _connect(self) -> Any:
        raise NotImplementedError

    @contextmanager
    def _migrate_lock(self) -> Iterator[None]:
        """A transaction no other process can migrate in at the same time."""
        raise NotImplementedError
        yield

    def _sql(self, sql: str) -> str:
        return sql

    # -- schema ------------------------------------------------------------------------
    def migrate(self, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
        """Apply the pending migrations in order, once; returns the numbers applied."""
        with self._lock, self._migrate_lock():
            rows = self._execute("SELECT number, name FROM audit_migrations").fetchall()
            todo = pending({int(n): str(name) for n, name in rows}, migrations)
            for migration in todo:
                self._script(migration.sql(self.dialect))
                self._execute(
                    "INSERT INTO audit_migrations (number, name, applied_at) VALUES (?, ?, ?)",
                    (migration.number, migration.name, now_iso()),
                )
            return [m.number for m in todo]

    def applied_migrations(self) -> list[int]:
        with self._lock:
            rows = self._execute("SELECT number FROM audit_migrations ORDER BY number").fetchall()
        return [int(r[0]) for r in rows]

    def _script(self, script: str) -> None:
        raise NotImplementedError

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(self._sql(sql), params)

    # -- writes ------------------------------------------------------------------------
    def write(
        self, records: Sequence[AuditRecord], feedback: Sequence[FeedbackRecord] = ()
    ) -> None:
        """Append records (with their decisions) and feedback in one transaction.

        Raises (sqlite3 / psycopg errors) when the store is locked, full or gone: the sink
        spools and retries; nothing half-written stays behind.
        """
        with self._lock, self._transaction() as cursor:
            if records:
                cursor.executemany(
                    self._sql(_insert("requests", _REQUEST_FIELDS, "request_id")),
                    [_values(r.to_row(), _REQUEST_FIELDS) for r in records],
                )
                cursor.executemany(
                    self._sql(_insert("decisions", _DECISION_FIELDS, "request_id, position")),
                    [_values(d, _DECISION_FIELDS) for r in records for d in r.decisions()],
                )
            if feedback:
                cursor.executemany(
                    self._sql(_insert("feedback", _FEEDBACK_FIELDS, "feedback_id")),
                    [_values(f.to_row(), _FEEDBACK_FIELDS) for f in feedback],
                )

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        raise NotImplementedError
        yield

    # -- reads -------------------------------------------------------------------------
    def _records(self, where: str = "", params: Sequence[Any] = (), tail: str = "") -> list[Any]:
        sql = f"SELECT seq, {', '.join(_REQUEST_FIELDS)} FROM requests {where} {tail}"
        with self._lock:
            return list(self._execute(sql, params).fetchall())

    @staticmethod
    def _to_record(row: Sequence[Any]) -> AuditRecord:
        return AuditRecord.from_row(dict(zip(_REQUEST_FIELDS, row[1:], strict=True)))

    def count(self) -> int:
        with self._lock:
            return int(self._execute("SELECT COUNT(*) FROM requests").fetchone()[0])

    def get(self, request_id: str) -> AuditRecord | None:
        """The record with this id, or with this unique id prefix (>= 6 characters)."""
        rows = self._records("WHERE request_id = ?", (request_id,))
        if not rows and len(request_id) >= MIN_PREFIX:
            rows = self._records("WHERE request_id LIKE ?", (f"{_like(request_id)}%",), "LIMIT 2")
            if len(rows) > 1:
                raise KeyError(f"request id prefix {request_id!r} is ambiguous")
        return self._to_record(rows[0]) if rows else None

    def tail(self, limit: int = 20, after_seq: int = 0) -> list[tuple[int, AuditRecord]]:
        """The newest `limit` records after `after_seq`, oldest first, with their sequence."""
        rows = self._records("WHERE seq > ?", (after_seq, limit), "ORDER BY seq DESC LIMIT ?")
        return [(int(r[0]), self._to_record(r)) for r in reversed(rows)]

    def recent(self, kbs: Sequence[str] | None = None, limit: int = 50) -> list[AuditRecord]:
        """The newest `limit` records, newest first; of these KBs only, unless None."""
        if kbs is not None and not kbs:
            return []
        clause, params = where(kb=kbs)
        rows = self._records(clause, [*params, limit], "ORDER BY seq DESC LIMIT ?")
        return [self._to_record(r) for r in rows]

    def records(
        self, since: str | None = None, kb: str | None = None, page: int = 1000
    ) -> Iterator[AuditRecord]:
        """Every record (optionally since an ISO time, of one KB), oldest first, read in pages
        so an export neither loads the whole log nor holds the connection between pages."""
        clause, params = where(since=since, kb=kb or None)
        clause = f"{clause} AND seq > ?" if clause else "WHERE seq > ?"
        last = 0
        while rows := self._records(clause, [*params, last, page], "ORDER BY seq LIMIT ?"):
            yield from map(self._to_record, rows)
            last = int(rows[-1][0])

    def feedback_for(self, request_id: str) -> list[FeedbackRecord]:
        with self._lock:
            rows = self._execute(
                f"SELECT {', '.join(_FEEDBACK_FIELDS)} FROM feedback WHERE request_id = ? "
                "ORDER BY seq",
                (request_id,),
            ).fetchall()
        return [FeedbackRecord(**dict(zip(_FEEDBACK_FIELDS, r, strict=True))) for r in rows]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Read-only SQL (with `?` placeholders) for reports such as `guardrag audit stats`."""
        with self._lock:
            return [tuple(r) for r in self._execute(sql, params).fetchall()]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _values(row: dict[str, Any], columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple(row[c] for c in columns)


def _like(text: str) -> str:
    return text.replace("%", "").replace("_", "")


def where(
    *, since: str | None = None, prefix: str = "", **equal: str | Collection[str] | None
) -> tuple[str, list[Any]]:
    """The one WHERE-clause builder of the audit queries: `ts >= since`, and `column = value`
    (or `column IN (...)` for a collection) for each value that is not None. `prefix`
    qualifies the columns ("r."); the column names are ours, the values are parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if since:
        clauses.append(f"{prefix}ts >= ?")
        params.append(since)
    for column, value in equal.items():
        if value is None:
            continue
        if isinstance(value, str):
            clauses.append(f"{prefix}{column} = ?")
            params.append(value)
        else:
            values = list(value)
            clauses.append(
                f"{prefix}{column} IN ({', '.join('?' * len(values))})" if values else "0 = 1"
            )
            params.extend(values)
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


class SQLiteAuditStore(SqlAuditStore):
    """One SQLite file in WAL mode: readers never block the writer, several processes share it."""

    dialect: Dialect = "sqlite"

    def __init__(
        self,
        path: Path | str,
        *,
        busy_timeout_s: float = 2.0,
        migrations: tuple[Migration, ...] = MIGRATIONS,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        super().__init__(f"sqlite:///{self.path}", migrations)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode (isolation_level=None): transactions are opened explicitly, so a
        # write takes the lock with BEGIN IMMEDIATE and never upgrades (and deadlocks) later.
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit reported to the sink survives a power cut, not just a killed process.
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(MIGRATIONS_TABLE)
        return conn

    @contextmanager
    def _migrate_lock(self) -> Iterator[None]:
        with self._transaction():
            yield

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        cursor = self._conn.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            yield cursor
        except BaseException:
            self._conn.rollback()
            raise
        self._conn.commit()

    def _script(self, script: str) -> None:
        # executescript() would COMMIT first; run statement by statement inside the
        # migration's transaction instead (triggers contain ';' inside BEGIN ... END).
        for statement in _sqlite_statements(script):
            self._conn.execute(statement)

    def integrity_check(self) -> str:
        with self._lock:
            return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    def set_max_pages(self, pages: int) -> None:
        """Cap the file size (SQLite's max_page_count); tests use it to simulate a full disk."""
        with self._lock:
            self._conn.execute(f"PRAGMA max_page_count = {int(pages)}")

    def page_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA page_count").fetchone()[0])


def _sqlite_statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


class PostgresAuditStore(SqlAuditStore):
    """The same log in Postgres, for several replicas writing one store (needs psycopg).

    One connection a store. A connection the server dropped (restart, failover) is replaced
    before the next statement; the statement that found it broken fails, and the sink
    spools that batch and retries it.
    """

    dialect: Dialect = "postgres"
    #: Seconds to wait for the server to accept a connection: a hung server must not hold
    #: the audit writer (the sink spools meanwhile) or a reader for long.
    connect_timeout_s = 5

    def _connect(self) -> Any:
        try:
            import psycopg  # lazy: only a Postgres URL needs the driver
        except ImportError:
            raise AuditUnavailable(
                "GUARDRAG_AUDIT_URL is a Postgres URL but psycopg is not installed: "
                "pip install 'psycopg[binary]'"
            ) from None
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout_s)
        conn.execute(MIGRATIONS_TABLE)
        return conn

    def _live(self) -> Any:
        if self._conn.broken or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._live().execute(self._sql(sql), params)

    def _sql(self, sql: str) -> str:
        return _QMARK.sub("%s", sql.replace("%", "%%"))

    @contextmanager
    def _migrate_lock(self) -> Iterator[None]:
        with self._transaction() as cursor:
            # Concurrent replicas starting together migrate one at a time.
            cursor.execute("SELECT pg_advisory_xact_lock(4715)")
            yield

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        conn = self._live()
        with conn.transaction():
            yield conn.cursor()

    def _script(self, script: str) -> None:
        self._live().execute(script)


_QMARK = re.compile(r"\?")


def open_audit_store(url: str, **options: Any) -> SqlAuditStore:
    """A store from a URL: `postgresql://...`, `sqlite:///path`, or a plain file path."""
    if url.startswith(("postgres://", "postgresql://")):
        return PostgresAuditStore(url, **options)
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    return SQLiteAuditStore(Path(path), **options)
