"""Holding back an entry that is already indexed, and the operator's release of one.

`hold_back_served`: moderate_output refused an answer that broke an output invariant, and the
entry it came from breaks it too. The KB is republished without that entry (the next
retrieval cannot find it) and the hold is recorded with the KB, beside ingest's.

`release`: the operator clears one held-back entry (`guardrag quarantine release KB ID`). Its
(source id, content hash) goes on the KB's release list and its source file is re-ingested, so
the entry is indexed again; an entry edited since is screened afresh.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from guardrag.contract import GuardragError
from guardrag.core.embedder import Embedder
from guardrag.core.kb.ingest import IngestReport, ingest, snapshot_id
from guardrag.core.kb.quarantine import QUARANTINED, RELEASED, Hold
from guardrag.core.store import VectorStore

log = logging.getLogger(__name__)
_lock = threading.Lock()


class QuarantineError(GuardragError, ValueError):
    """A release or listing that cannot be done; the message says why."""


def hold_back_served(store: VectorStore, kb: str, holds: Mapping[str, Hold]) -> list[str]:
    """Republish `kb` without the entries `holds` names (source id -> why); returns the ids
    actually removed (none when another request removed them first)."""
    with _lock:
        info = store.kb_info(kb)
        if info is None:
            return []
        released = {str(r.get("source_id")) for r in info.extra.get(RELEASED, [])}
        points = list(store.points(kb))
        drop = [
            p
            for p in points
            if str(p.payload.get("source_id")) in holds
            and str(p.payload.get("source_id")) not in released
        ]
        if not drop:
            return []
        kept = [p for p in points if p not in drop]
        records = [
            holds[str(p.payload["source_id"])].record_for(
                str(p.payload["source_id"]),
                str(p.payload.get("source_file", "")),
                str(p.payload.get("source_file", "")),
                str(p.payload.get("content_hash", "")),
            )
            for p in drop
        ]
        store.publish(
            kb,
            kept,
            dataclasses.replace(
                info,
                snapshot_id=snapshot_id((p.id, str(p.payload["content_hash"])) for p in kept),
                count=len(kept),
                updated_at=datetime.now(UTC).isoformat(timespec="seconds"),
                extra={**info.extra, QUARANTINED: [*info.extra.get(QUARANTINED, []), *records]},
            ),
        )
        ids = [r["source_id"] for r in records]
        log.warning("kb %r: held back served entries %s (%s)", kb, ids, records[0]["rule"])
        return ids


def held(store: VectorStore, kb: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(kb, record) for every held-back entry, of one KB or all."""
    names = [kb] if kb else sorted(store.list_kbs())
    out: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        info = store.kb_info(name)
        if info is None:
            if kb:
                raise QuarantineError(f"no knowledge base {kb!r}")
            continue
        out += [(name, record) for record in info.extra.get(QUARANTINED, [])]
    return out


def release(store: VectorStore, embedder: Embedder, kb: str, source_id: str) -> IngestReport:
    """Release `source_id` from `kb`'s quarantine and re-ingest its file."""
    info = store.kb_info(kb)
    if info is None:
        raise QuarantineError(f"no knowledge base {kb!r}")
    records = [r for r in info.extra.get(QUARANTINED, []) if r.get("source_id") == source_id]
    if not records:
        listed = ", ".join(str(r.get("source_id")) for r in info.extra.get(QUARANTINED, []))
        raise QuarantineError(
            f"{source_id!r} is not held back in {kb!r} (held back: {listed or 'none'})"
        )
    record = records[-1]
    note = {
        "source_id": source_id,
        "content_hash": str(record.get("content_hash", "")),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    released = [*info.extra.get(RELEASED, []), note]
    if not store.annotate(kb, info.snapshot_id, {RELEASED: released}):
        raise QuarantineError(f"{kb!r} changed while releasing {source_id!r}; try again")
    path = Path(str(record.get("source_file", "")))
    if not path.is_file():
        raise QuarantineError(
            f"released {source_id!r}, but its file {path} is gone: ingest the entry again"
        )
    return ingest(store, embedder, kb, [path])
