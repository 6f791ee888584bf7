"""`guardrag audit replay`: ask a recorded question again, with its recorded knobs, against
the KB as it is now, and say what changed (and what changed around it: snapshot, prompts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from guardrag.core.audit.record import AuditRecord, build_record
from guardrag.core.audit.store import SqlAuditStore

if TYPE_CHECKING:
    from guardrag.faces.service import Guardrag

#: What a replay compares: the decision the customer saw.
COMPARED = ("outcome", "route", "refusal_reason", "refusal_stage", "citations", "answer")
#: What may explain a difference.
CONTEXT = ("snapshot_id", "config_hash", "prompt_version", "models")


@dataclass(frozen=True)
class Change:
    field: str
    before: Any
    after: Any


@dataclass
class ReplayReport:
    original: AuditRecord
    replayed: AuditRecord
    changes: list[Change] = field(default_factory=list)
    context: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.changes

    def render(self) -> str:
        head = f"replay of {self.original.request_id} ({self.original.ts}, kb {self.original.kb})"
        lines = [head, *(f"note: {n}" for n in self.notes)]
        lines += [f"  {c.field}: {c.before!r} -> {c.after!r}" for c in self.context]
        if self.same:
            lines.append(f"unchanged: {self.original.outcome} {_decision(self.original)}")
        else:
            lines.append("changed:")
            lines += [f"  {c.field}:\n    - {c.before!r}\n    + {c.after!r}" for c in self.changes]
        return "\n".join(lines)


def _decision(record: AuditRecord) -> str:
    return str(record.route or f"{record.refusal_reason} at {record.refusal_stage}")


def _compared(record: AuditRecord, name: str) -> Any:
    if name == "citations":  # scores move with every re-embedding; which entries is the point
        return [c.get("source_id") for c in record.citations]
    return getattr(record, name)


def replay(store: SqlAuditStore, request_id: str, bot: Guardrag) -> ReplayReport:
    """Re-run a recorded request on `bot` (current KB) with the recorded knobs."""
    original = store.get(request_id)
    if original is None:
        raise KeyError(f"no audit record with request id {request_id!r}")
    result = bot.ask(original.question, original.kb, knobs=original.config)
    info = bot.services.store.kb_info(original.kb)
    replayed = build_record(
        result,
        kb=original.kb,
        knobs=original.config,
        snapshot_id=info.snapshot_id if info else None,
        models=bot.services.model_names(),
        source="replay",
    )
    report = ReplayReport(original, replayed)
    for name in COMPARED:
        before, after = _compared(original, name), _compared(replayed, name)
        if before != after:
            report.changes.append(Change(name, before, after))
    for name in CONTEXT:
        before, after = getattr(original, name), getattr(replayed, name)
        if before != after:
            report.context.append(Change(name, before, after))
    if original.redactions:
        report.notes.append(
            f"the question was stored with {sum(original.redactions.values())} value(s) "
            "redacted; the replay asks the redacted text"
        )
    return report
