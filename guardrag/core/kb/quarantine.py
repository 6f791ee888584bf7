"""Entries that must not be served are held back at ingest, with the rule, the reason and the
sentence, and listed with the KB (`guardrag kbs`, `guardrag quarantine list`, the KB tab).

An entry is held back when
1. it carries instructions for a model (`guards.scan_passage`: rules);
2. it breaks an output invariant (`guards.invariants`: it asks the customer to hand over a
   credential, or to send something off the owner's domains or to a given account);
3. one of its sentences does not belong (`guards.foreign`: found by meaning: written to an
   assistant, or unrelated to the entry's question and the KB's topic), or it is an errand
   about things the rest of the KB never mentions (`guards.novelty`, rule
   `passage.foreign_errand`);
4. it was held back when served (moderate_output, `kb.holdback`) and is still the same text.
An operator's release (`guardrag quarantine release`) exempts one (source id, content hash):
an edited entry is checked again.

The KB's allow-list of link domains is decided here too: `--allowed-domains`, else the one
given earlier, else the registrable domains of the KB's `url` fields and fallback URL. Entries
linking elsewhere are not held back (help text links to partners) but reported, because
answers will show those links removed.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from guardrag.core.embedder import Embedder
from guardrag.core.guards import scan_passage
from guardrag.core.guards.ingest.foreign import (
    PASSAGE_INJECTION,
    PASSAGE_MODEL,
    foreign_detector,
    vocabulary,
)
from guardrag.core.guards.output.invariants import (
    credential_ask,
    foreign_links,
    owner_domains,
    parse_domains,
    send_elsewhere,
)
from guardrag.core.kb.entries import Entry
from guardrag.core.store import KBInfo, Point

log = logging.getLogger(__name__)

#: KBInfo.extra keys
QUARANTINED, RELEASED, ALLOWED, ALLOWED_FROM, SCREENED_BY = (
    "quarantined",
    "released",
    "allowed_domains",
    "allowed_domains_from",
    "screened_by",
)


def screener_version() -> str:
    """Identifies the learned models the entries were screened with (new models re-screen)."""
    digest = hashlib.sha256()
    for path in (PASSAGE_INJECTION, PASSAGE_MODEL):
        digest.update(path.read_bytes() if path.is_file() else b"")
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class Hold:
    """Why one entry is held back."""

    rule: str
    why: str
    sentence: str = ""
    stage: str = "ingest"  # "ingest" | "served"

    def record(self, entry: Entry) -> dict[str, str]:
        return self.record_for(
            entry.source_id, entry.source_file, entry.location, entry.content_hash
        )

    def record_for(
        self, source_id: str, source_file: str, location: str, content_hash: str
    ) -> dict[str, str]:
        """The KB's record of this hold (KBInfo.extra["quarantined"])."""
        return {
            "source_file": source_file,
            "location": location,
            "source_id": source_id,
            "content_hash": content_hash,
            "rule": self.rule,
            "why": self.why,
            "sentence": self.sentence,
            "stage": self.stage,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }


@dataclass
class Screening:
    """What ingest indexes, what it holds back, and what it records with the KB."""

    kept: list[Entry]
    held: list[tuple[Entry, Hold]]
    allowed: list[str]
    allowed_from: str  # "given" | "default"
    released: list[dict[str, str]] = field(default_factory=list)
    earlier: list[dict[str, str]] = field(default_factory=list)
    unlisted: dict[str, list[str]] = field(default_factory=dict)  # host -> source ids

    def report_lines(self) -> list[str]:
        return [f"{e.location} {e.source_id}: {h.rule} ({h.why})" for e, h in self.held]

    @property
    def extra(self) -> dict[str, Any]:
        return {
            QUARANTINED: self.earlier + [h.record(e) for e, h in self.held],
            RELEASED: self.released,
            ALLOWED: self.allowed,
            ALLOWED_FROM: self.allowed_from,
            SCREENED_BY: screener_version(),
        }


def _allow_list(
    given: Sequence[str] | None,
    old: KBInfo | None,
    urls: Iterable[str | None],
) -> tuple[list[str], str]:
    if given:
        return parse_domains(",".join(given)), "given"
    if old is not None and old.extra.get(ALLOWED_FROM) == "given":
        return list(old.extra.get(ALLOWED, [])), "given"
    return owner_domains(urls), "default"


def _key(record: Mapping[str, Any]) -> tuple[str, str]:
    return str(record.get("source_id")), str(record.get("content_hash"))


def quarantine(
    entries: list[Entry],
    embedder: Embedder,
    old: KBInfo | None = None,
    previous: Mapping[str, Point] | None = None,
    ingested_files: set[str] | None = None,
    *,
    fallback_url: str | None = None,
    allowed_domains: Sequence[str] | None = None,
) -> Screening:
    """Screen `entries` (this ingest's rows) against the KB's previous snapshot."""
    previous = previous or {}
    ingested_files = ingested_files or {e.source_file for e in entries}
    other = [p for p in previous.values() if p.payload.get("source_file") not in ingested_files]
    urls = [e.url for e in entries] + [p.payload.get("url") for p in other]
    fallback = fallback_url if fallback_url is not None else (old.fallback_url if old else None)
    allowed, allowed_from = _allow_list(allowed_domains, old, [*urls, fallback])
    extra = old.extra if old is not None else {}
    released = list(extra.get(RELEASED, []))
    released_keys = {_key(r) for r in released}
    held_before = {_key(r): r for r in extra.get(QUARANTINED, []) if r.get("stage") == "served"}
    vetted = {
        (str(p.payload.get("source_id")), str(p.payload.get("content_hash")))
        for p in previous.values()
    }
    rescreen = extra.get(SCREENED_BY) != screener_version()

    held: dict[int, Hold] = {}
    to_scan: list[int] = []
    for i, entry in enumerate(entries):
        key = (entry.source_id, entry.content_hash)
        if key in released_keys:
            continue
        if key in held_before:
            record = held_before[key]
            held[i] = Hold(
                str(record.get("rule")),
                str(record.get("why")),
                str(record.get("sentence", "")),
                "served",
            )
            continue
        found = (
            scan_passage(f"{entry.title}\n{entry.text}")
            or credential_ask(entry.text, allowed)
            or send_elsewhere(entry.text, allowed)
        )
        if found is not None:
            held[i] = Hold(found.rule, found.detail)
        elif rescreen or key not in vetted:
            to_scan.append(i)
    if to_scan:
        topic = [e.title for e in entries] + [str(p.payload.get("title", "")) for p in other]
        pairs = [(entries[i].title, entries[i].text) for i in to_scan]
        # The words of the whole KB, this file's entries and the other files' (errands are
        # left out of it: planted ones must not vouch for each other).
        words = vocabulary(
            [(e.title, e.text) for e in entries]
            + [(str(p.payload.get("title", "")), str(p.payload.get("text", ""))) for p in other]
        )
        scanned = foreign_detector(embedder).scan(pairs, topic, words)
        for i, foreign in zip(to_scan, scanned, strict=True):
            if foreign is not None:
                held[i] = Hold(foreign.rule, foreign.why(), foreign.sentence)
    screening = Screening(
        kept=[e for i, e in enumerate(entries) if i not in held],
        held=[(entries[i], held[i]) for i in sorted(held)],
        allowed=allowed,
        allowed_from=allowed_from,
        released=released,
        earlier=[
            r for r in extra.get(QUARANTINED, []) if r.get("source_file") not in ingested_files
        ],
    )
    if allowed:
        for entry in screening.kept:
            for link in foreign_links(entry.text, allowed):
                screening.unlisted.setdefault(link.host, []).append(entry.source_id)
    _warn(screening)
    return screening


def _warn(screening: Screening) -> None:
    if not screening.allowed:
        log.warning(
            "no allowed link domains (no url fields, no fallback URL, no --allowed-domains): "
            "links in answers are checked against their sources only"
        )
    for host, ids in sorted(screening.unlisted.items()):
        shown = ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")
        log.warning(
            "%d entries link to %s, which is not on the allowed domains (%s): answers will show "
            "it removed; pass --allowed-domains to allow it (%s)",
            len(ids),
            host,
            ", ".join(screening.allowed),
            shown,
        )
