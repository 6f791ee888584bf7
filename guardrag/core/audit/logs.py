"""Structured JSON logs: one object per line, every request line keyed by its request id.

Off until `configure_json_logging()` is called (the CLI and API do it at start-up); until
then request lines go nowhere and warnings reach stderr through logging's last resort.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guardrag.core.audit.record import AuditRecord

request_log = logging.getLogger("guardrag.request")

#: The request a log line belongs to, for lines written while a request runs.
current_request_id: ContextVar[str | None] = ContextVar("guardrag_request_id", default=None)

# Attributes every LogRecord has; anything else was passed with `extra=` and is a field.
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "message", "request_id", ...extra fields}` on one line."""

    def converter(self, secs: float | None) -> time.struct_time:
        return time.gmtime(secs)  # UTC, like the audit store's timestamps

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or current_request_id.get()
        if request_id:
            line["request_id"] = request_id
        line.update(
            (k, v) for k, v in record.__dict__.items() if k not in _STANDARD and k not in line
        )
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_json_logging(level: int = logging.INFO, stream: IO[str] | None = None) -> None:
    """Send `guardrag.*` logs to `stream` (stderr) as JSON lines; idempotent."""
    logger = logging.getLogger("guardrag")
    for handler in logger.handlers:
        if isinstance(handler.formatter, JsonFormatter):
            return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def log_request(record: AuditRecord) -> None:
    """One `request` line per audited request: what happened, never the question or answer."""
    if not request_log.isEnabledFor(logging.INFO):
        return
    request_log.info(
        "request",
        extra={
            "request_id": record.request_id,
            "source": record.source,
            "kb": record.kb,
            "snapshot_id": record.snapshot_id,
            "config_hash": record.config_hash,
            "outcome": record.outcome,
            "route": record.route,
            "reason": record.refusal_reason,
            "stage": record.refusal_stage,
            "latency_ms": record.latency_ms,
            "nodes_ms": {step.get("node"): step.get("ms") for step in record.trail},
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "cost_usd": record.cost_usd,
        },
    )
