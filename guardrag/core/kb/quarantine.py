"""Entries that carry instructions for a model are held back at ingest, with the reason."""

from __future__ import annotations

from guardrag.core.guards import scan_passage
from guardrag.core.kb.entries import Entry
from guardrag.core.store import KBInfo


def quarantine(entries: list[Entry]) -> tuple[list[Entry], list[tuple[Entry, str]]]:
    """Entries without instructions aimed at the model, and a report line for each one held back.

    A KB entry saying "ignore previous instructions..." is never indexed, so no route (verbatim
    FAQ answer or LLM context) can ever serve it; a held-back entry that was indexed before is
    removed like any row deleted from its source.
    """
    kept: list[Entry] = []
    flagged: list[tuple[Entry, str]] = []
    for entry in entries:
        finding = scan_passage(f"{entry.title}\n{entry.text}")
        if finding is None:
            kept.append(entry)
        else:
            flagged.append((entry, f"{finding.rule} ({finding.detail})"))
    return kept, flagged


def held_back(
    old: KBInfo | None, ingested_files: set[str], flagged: list[tuple[Entry, str]]
) -> list[dict[str, str]]:
    """The KB's held-back entries: earlier ones from other files, plus this ingest's."""
    earlier = [
        q
        for q in (old.extra.get("quarantined", []) if old else [])
        if q.get("source_file") not in ingested_files
    ]
    return earlier + [
        {"source_file": e.source_file, "location": e.location, "source_id": e.source_id, "why": why}
        for e, why in flagged
    ]
