"""Forward-only, numbered schema migrations of the audit store (SQLite and Postgres).

A migration is never edited or removed once released: a change is a new number. Applied
numbers are recorded in `audit_migrations`; a store whose schema is newer than this code
refuses to open rather than write rows an older reader would misread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from guardrag.contract import GuardragError

Dialect = Literal["sqlite", "postgres"]


class AuditSchemaError(GuardragError, RuntimeError):
    """The store's schema does not match this code's migrations (newer, or edited)."""


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sqlite: str
    postgres: str

    def sql(self, dialect: Dialect) -> str:
        return self.sqlite if dialect == "sqlite" else self.postgres


def _sqlite_append_only(table: str) -> str:
    # The log is evidence: nothing may rewrite or remove a row once written.
    return "\n".join(
        f"CREATE TRIGGER {table}_no_{op} BEFORE {op.upper()} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, 'audit table {table} is append-only'); END;"
        for op in ("update", "delete")
    )


def _postgres_append_only(table: str) -> str:
    return (
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION audit_append_only();"
    )


_REQUEST_COLUMNS = """
    request_id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    source TEXT NOT NULL,
    thread_id TEXT,
    row_id TEXT,
    kb TEXT NOT NULL,
    snapshot_id TEXT,
    config_hash TEXT NOT NULL,
    config TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    models TEXT NOT NULL,
    question TEXT NOT NULL,
    redactions TEXT NOT NULL,
    outcome TEXT NOT NULL,
    route TEXT,
    refusal_reason TEXT,
    refusal_stage TEXT,
    refusal_kind TEXT,
    answer TEXT NOT NULL,
    confidence DOUBLE PRECISION NOT NULL,
    citations TEXT NOT NULL,
    trail TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    latency_ms DOUBLE PRECISION NOT NULL
"""
_DECISION_COLUMNS = """
    request_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    node TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT NOT NULL,
    score DOUBLE PRECISION,
    threshold DOUBLE PRECISION,
    ms DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (request_id, position)
"""
_FEEDBACK_COLUMNS = """
    feedback_id TEXT NOT NULL UNIQUE,
    request_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    score INTEGER NOT NULL,
    comment TEXT NOT NULL
"""
_INDEXES = """
CREATE INDEX requests_ts ON requests (ts);
CREATE INDEX requests_kb_ts ON requests (kb, ts);
CREATE INDEX decisions_node ON decisions (node);
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "requests_and_decisions",
        sqlite=f"""
CREATE TABLE requests (seq INTEGER PRIMARY KEY AUTOINCREMENT, {_REQUEST_COLUMNS});
CREATE TABLE decisions ({_DECISION_COLUMNS});
{_INDEXES}
{_sqlite_append_only("requests")}
{_sqlite_append_only("decisions")}
""",
        postgres=f"""
CREATE TABLE requests (seq BIGSERIAL PRIMARY KEY, {_REQUEST_COLUMNS});
CREATE TABLE decisions ({_DECISION_COLUMNS});
{_INDEXES}
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'audit table % is append-only', TG_TABLE_NAME; END $$;
{_postgres_append_only("requests")}
{_postgres_append_only("decisions")}
""",
    ),
    Migration(
        2,
        "feedback",
        sqlite=f"""
CREATE TABLE feedback (seq INTEGER PRIMARY KEY AUTOINCREMENT, {_FEEDBACK_COLUMNS});
CREATE INDEX feedback_request ON feedback (request_id);
{_sqlite_append_only("feedback")}
""",
        postgres=f"""
CREATE TABLE feedback (seq BIGSERIAL PRIMARY KEY, {_FEEDBACK_COLUMNS});
CREATE INDEX feedback_request ON feedback (request_id);
{_postgres_append_only("feedback")}
""",
    ),
)

MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS audit_migrations "
    "(number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
)


def pending(applied: dict[int, str], migrations: tuple[Migration, ...]) -> list[Migration]:
    """The migrations still to apply, in order; raises when the store is ahead or differs."""
    known = {m.number: m.name for m in migrations}
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise AuditSchemaError(
            f"audit store has migration(s) {unknown} this guardrag does not know; "
            "it was written by a newer version: upgrade guardrag, never downgrade the store"
        )
    renamed = [n for n, name in applied.items() if known[n] != name]
    if renamed:
        raise AuditSchemaError(f"audit migrations {renamed} were renamed or edited after release")
    numbers = [m.number for m in migrations]
    if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
        raise AuditSchemaError("audit migrations must have unique, increasing numbers")
    todo = [m for m in migrations if m.number not in applied]
    if applied and todo and todo[0].number < max(applied):
        raise AuditSchemaError(
            f"audit migration {todo[0].number} sits before already applied ones: "
            "new migrations take the next number"
        )
    return todo
