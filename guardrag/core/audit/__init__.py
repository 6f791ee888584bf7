"""The audit log: every answer and refusal, redacted, append-only, replayable and costed.

`AuditSink.record(result, ...)` is the one call a request makes; `guardrag audit` reads it.
"""

from guardrag.core.audit.logs import configure_json_logging
from guardrag.core.audit.migrations import AuditSchemaError
from guardrag.core.audit.record import AuditRecord, FeedbackRecord, build_record
from guardrag.core.audit.sink import AuditSink, SinkStats
from guardrag.core.audit.store import (
    AuditUnavailable,
    PostgresAuditStore,
    SqlAuditStore,
    SQLiteAuditStore,
    open_audit_store,
)

__all__ = [
    "AuditRecord",
    "AuditSchemaError",
    "AuditSink",
    "AuditUnavailable",
    "FeedbackRecord",
    "PostgresAuditStore",
    "SQLiteAuditStore",
    "SinkStats",
    "SqlAuditStore",
    "build_record",
    "configure_json_logging",
    "open_audit_store",
]
