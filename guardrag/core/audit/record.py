"""What one audit row holds, and how it is built from a `Result` (redacted on the way)."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from guardrag.config.prompts import PROMPT_VERSION
from guardrag.config.run_config import RunConfig
from guardrag.contract import Result

#: Record fields stored as JSON text (portable across SQLite and Postgres).
JSON_FIELDS = ("config", "models", "redactions", "citations", "trail")
#: Characters no store can keep: lone UTF-16 surrogates (not encodable as UTF-8) and NUL
#: (Postgres text refuses it). Each becomes U+FFFD, so a record can always be written.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable(value: Any) -> Any:
    """`value` (JSON-like) with every string, keys included, writable by any audit store."""
    if isinstance(value, str):
        return _UNSTORABLE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def effective_config(knobs: dict[str, Any] | None) -> dict[str, Any]:
    """Every RunConfig knob with the value this run used (defaults filled in, non-knobs dropped)."""
    return RunConfig.from_runnable_config({"configurable": dict(knobs or {})}).model_dump()


def config_hash(config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


class AuditRecord(BaseModel):
    """One request as the audit log keeps it: every free-text field already redacted."""

    request_id: str
    ts: str
    source: str = "python"
    thread_id: str | None = None
    row_id: str | None = None
    kb: str
    snapshot_id: str | None = None
    config_hash: str
    config: dict[str, Any] = Field(default_factory=dict)
    prompt_version: str = PROMPT_VERSION
    models: dict[str, str | None] = Field(default_factory=dict)
    question: str
    redactions: dict[str, int] = Field(default_factory=dict)
    outcome: str
    route: str | None = None
    refusal_reason: str | None = None
    refusal_stage: str | None = None
    refusal_kind: str | None = None
    answer: str = ""
    confidence: float = 0.0
    citations: list[dict[str, Any]] = Field(default_factory=list)
    trail: list[dict[str, Any]] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0

    def to_row(self) -> dict[str, Any]:
        """Column values: JSON fields serialised, the rest as is."""
        row = self.model_dump()
        for name in JSON_FIELDS:
            row[name] = json.dumps(row[name], ensure_ascii=False, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> AuditRecord:
        data = {k: v for k, v in row.items() if k in cls.model_fields}
        for name in JSON_FIELDS:
            data[name] = json.loads(data[name])
        return cls.model_validate(data)

    def decisions(self) -> list[dict[str, Any]]:
        """Rows of the `decisions` table: one per trail entry, for per-node statistics."""
        return [
            {
                "request_id": self.request_id,
                "position": position,
                "node": str(step.get("node", "")),
                "verdict": str(step.get("verdict", "")),
                "reason": str(step.get("reason", "")),
                "score": step.get("score"),
                "threshold": step.get("threshold"),
                "ms": float(step.get("ms") or 0.0),
            }
            for position, step in enumerate(self.trail)
        ]


class FeedbackRecord(BaseModel):
    """A user's verdict on an answer; appended, never merged into the request row."""

    feedback_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    request_id: str
    ts: str = Field(default_factory=now_iso)
    score: int
    comment: str = ""

    def to_row(self) -> dict[str, Any]:
        return self.model_dump()


def build_record(
    result: Result,
    *,
    kb: str,
    knobs: dict[str, Any] | None = None,
    snapshot_id: str | None = None,
    models: dict[str, str | None] | None = None,
    thread_id: str | None = None,
    source: str = "python",
    ts: str | None = None,
) -> AuditRecord:
    """The redacted audit record of `result`; nothing raw from the question survives."""
    # lazy: the detectors load the guards package (guardrails-ai, seconds), which readers of
    # the log (`guardrag audit tail`) never need
    from guardrag.core.audit.redact import redact, redact_data

    found: Counter[str] = Counter()
    config = effective_config(knobs)
    refusal = result.refusal
    fields = storable(
        {
            "row_id": result.id,
            "question": result.question,
            "answer": result.answer,
            "citations": [c.model_dump() for c in result.citations],
            "trail": [d.model_dump() for d in result.trail],
        }
    )
    record = {
        "request_id": result.request_id,
        "ts": ts or now_iso(),
        "source": source,
        "thread_id": thread_id,
        "row_id": None if fields["row_id"] is None else redact(fields["row_id"], found),
        "kb": kb,
        "snapshot_id": snapshot_id,
        "config_hash": config_hash(config),
        "config": config,
        "models": models or {},
        "question": redact(fields["question"], found),
        "redactions": dict(found),
        "outcome": result.outcome,
        "route": result.route,
        "refusal_reason": refusal.reason.value if refusal else None,
        "refusal_stage": refusal.stage if refusal else None,
        "refusal_kind": refusal.kind if refusal else None,
        "answer": redact(fields["answer"]),
        "confidence": result.confidence,
        "citations": redact_data(fields["citations"]),
        "trail": redact_data(fields["trail"]),
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "cost_usd": result.usage.estimated_cost_usd,
        "latency_ms": result.latency_ms,
    }
    return AuditRecord(**storable(record))
