"""Knowledge-base ingest: FAQ rows (JSON, JSONL, CSV) and documents (Markdown, text, JSONL).

Everything is parsed and validated before anything is written, then published as one snapshot:
a bad file or row stops the ingest with its location and leaves the previous snapshot serving.
Point ids derive from the KB and each row's source key, so a re-ingest updates changed rows,
keeps unchanged ones (reusing their vectors) and removes rows deleted from the source.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from guardrag.core.embedder import Embedder, remembering
from guardrag.core.kb.calibration import KEY as CALIBRATION
from guardrag.core.kb.calibration import Calibration, calibrate
from guardrag.core.kb.entries import Entry
from guardrag.core.kb.paragraphs import numbered
from guardrag.core.kb.quarantine import quarantine
from guardrag.core.kb.readers import IngestLimits, load_entries
from guardrag.core.kb.stats import KBStats, point_text
from guardrag.core.rerank import FusedReranker, Reranker
from guardrag.core.store import IndexDamaged, KBInfo, Point, VectorStore, bm25

log = logging.getLogger(__name__)
_NAMESPACE = uuid.UUID("6f6b1d52-5a0e-4c1c-9a55-6c0b7a3f0e11")
#: KBInfo.extra keys: what the KB holds ("faq" | "documents" | "mixed") and its documents'
#: titles (refusals and the display name speak of them, not of a help centre).
KIND, DOCUMENTS = "kind", "documents"


@dataclass
class IngestReport:
    kb: str
    snapshot_id: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    total: int = 0
    skipped: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # text the document readers left out
    kind: str = "faq"  # "faq" | "documents" | "mixed"
    calibration: Calibration | None = None

    def summary(self) -> str:
        text = (
            f"kb {self.kb!r}: {self.total} entries, snapshot {self.snapshot_id} "
            f"(+{self.added} added, ~{self.updated} updated, ={self.unchanged} unchanged, "
            f"-{self.removed} removed)"
        )
        if self.skipped:
            text += f"; {len(self.skipped)} bad rows skipped"
        if self.flagged:
            text += f"; {len(self.flagged)} quarantined as possible prompt injection"
        if self.dropped:
            text += f"; {len(self.dropped)} hidden or unreadable parts of documents left out"
        if self.calibration is not None:
            text += (
                f"; verbatim-answer threshold {self.calibration.faq_answer_threshold:.3f} "
                f"(calibrated on {self.calibration.probes} held-out probes)"
            )
        return text


def point_id(kb: str, source_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{kb}\x00{source_id}"))


def snapshot_id(keys: Iterable[tuple[str, str]]) -> str:
    """A digest of the (point id, content hash) pairs: equal for equal content, in any order."""
    digest = hashlib.sha256()
    for key in sorted(f"{pid}:{content_hash}" for pid, content_hash in keys):
        digest.update(key.encode())
    return digest.hexdigest()[:12]


def _embedded(
    entries: list[tuple[str, Entry]],
    reused: dict[str, Point],
    embedder: Embedder,
    chunk: int,
    progress: Callable[[int], None] | None,
) -> Iterator[Point]:
    """Points of the (point id, entry) pairs in order, embedded `chunk` entries at a time as the
    store takes them (memory holds one chunk of vectors, not the KB's); unchanged rows reused.

    Each chunk's titles and bodies go to the embedder in one call: it groups texts of similar
    token length, and more texts make closer groups.
    """
    for start in range(0, len(entries), chunk):
        part = entries[start : start + chunk]
        todo = [e for pid, e in part if pid not in reused]
        vectors = embedder.embed([e.embed_text for e in todo] + [e.text for e in todo])
        sparse = bm25.encode_documents([e.sparse_text for e in todo])
        made = iter(zip(vectors[: len(todo)], vectors[len(todo) :], sparse, strict=True))
        for pid, entry in part:
            if pid in reused:
                yield reused[pid]
            else:
                title, body, terms = next(made)
                yield Point(pid, title.tolist(), terms, entry.payload(), body.tolist())
        if progress:
            progress(len(part))


@dataclass(frozen=True)
class Parsed:
    """Source files read and parsed once: their entries, the bad rows skipped (with
    `skip_bad_rows`) and what document readers left out."""

    paths: list[Path]  # resolved: a row's source file is where it came from, whatever the cwd
    entries: list[Entry]
    skipped: list[str]
    dropped: list[str]


def parse(
    paths: list[Path],
    columns: dict[str, str] | None = None,
    skip_bad_rows: bool = False,
    limits: IngestLimits | None = None,
) -> Parsed:
    """Read and validate every source once (raises IngestError on the first problem unless
    `skip_bad_rows`); a caller that shows progress learns the entry count from it before
    `ingest_parsed` embeds them."""
    paths = [p.resolve() for p in paths]
    dropped: list[str] = []
    entries, skipped = load_entries(paths, columns, skip_bad_rows, limits, dropped=dropped)
    return Parsed(paths, entries, skipped, dropped)


def ingest(
    store: VectorStore,
    embedder: Embedder,
    kb: str,
    paths: list[Path],
    *,
    columns: dict[str, str] | None = None,
    description: str | None = None,
    fallback_url: str | None = None,
    skip_bad_rows: bool = False,
    progress: Callable[[int], None] | None = None,
    batch_size: int = 512,
    reranker: Reranker | None = None,
    allowed_domains: list[str] | None = None,
) -> IngestReport:
    """Parse, embed and publish `paths` into `kb` as one new snapshot (`parse`, then
    `ingest_parsed`)."""
    return ingest_parsed(
        store, embedder, kb, parse(paths, columns, skip_bad_rows),
        description=description, fallback_url=fallback_url, progress=progress,
        batch_size=batch_size, reranker=reranker, allowed_domains=allowed_domains,
    )  # fmt: skip


def ingest_parsed(
    store: VectorStore,
    embedder: Embedder,
    kb: str,
    parsed: Parsed,
    *,
    description: str | None = None,
    fallback_url: str | None = None,
    progress: Callable[[int], None] | None = None,
    batch_size: int = 512,
    reranker: Reranker | None = None,
    allowed_domains: list[str] | None = None,
) -> IngestReport:
    """Embed and publish parsed sources into `kb` as one new snapshot.

    Rows from other source files already in the KB are kept; rows of these files that are gone
    from the source are removed. Vectors of unchanged rows are reused, not recomputed. Rows are
    embedded `batch_size` at a time while the store writes them; `progress` hears of each batch.
    Once published, the KB calibrates its verbatim-answer threshold on its own FAQ entries
    (kb/calibration.py, scored by `reranker` as questions will be) and keeps it with the snapshot.
    """
    paths, entries = parsed.paths, parsed.entries
    old_info, previous = _previous_snapshot(store, kb, paths)
    # The screen, the points and calibration all embed the FAQ questions: once is enough, and
    # the questions the KB already stores need no embedding at all.
    memo = remembering(embedder)
    asked = [(str(p.payload["question"]), p.dense) for p in previous.values() if _is_faq(p)]
    with memo.session((e.title for e in entries if e.kind == "faq"), asked):
        report = _ingest(
            store, memo, kb, paths, entries, parsed.skipped, old_info, previous,
            description=description, fallback_url=fallback_url, progress=progress,
            batch_size=batch_size, reranker=reranker, allowed_domains=allowed_domains,
        )  # fmt: skip
    report.dropped = parsed.dropped
    return report


def kb_kind(payloads: Iterable[dict[str, object]]) -> tuple[str, list[str]]:
    """What a KB holds ("faq", "documents" or "mixed") and its documents' titles, in order."""
    kinds: set[object] = set()
    titles: dict[str, None] = {}
    for payload in payloads:
        kinds.add(payload.get("kind"))
        if payload.get("kind") == "doc":
            titles[str(payload.get("doc_title") or payload.get("source_file") or "")] = None
    kind = "mixed" if len(kinds) > 1 else "documents" if kinds == {"doc"} else "faq"
    return kind, [t for t in titles if t]


def _display_name(description: str | None, old: KBInfo | None, kind: str, titles: list[str]) -> str:
    """--description, else the one given before, else a lone document's title."""
    if description is not None:
        return description
    if old is not None and old.description:
        return old.description
    return titles[0] if kind == "documents" and len(titles) == 1 else ""


def _is_faq(point: Point) -> bool:
    return point.payload.get("kind") == "faq" and bool(point.dense)


def _ingest(
    store: VectorStore,
    embedder: Embedder,
    kb: str,
    paths: list[Path],
    entries: list[Entry],
    skipped: list[str],
    old_info: KBInfo | None,
    previous: dict[str, Point],
    *,
    description: str | None,
    fallback_url: str | None,
    progress: Callable[[int], None] | None,
    batch_size: int,
    reranker: Reranker | None,
    allowed_domains: list[str] | None,
) -> IngestReport:
    ingested_files = {str(p) for p in paths}
    # Held back (kb/quarantine.py): instructions for a model, broken output invariants,
    # sentences that do not belong; also decides the KB's allowed link domains.
    screened = quarantine(
        entries, embedder, old_info, previous, ingested_files,
        fallback_url=fallback_url, allowed_domains=allowed_domains,
    )  # fmt: skip
    entries, flagged = screened.kept, screened.report_lines()

    keyed = [(point_id(kb, entry.source_id), entry) for entry in entries]
    reused: dict[str, Point] = {}
    report = IngestReport(kb=kb, snapshot_id="", skipped=skipped, flagged=flagged)
    for pid, entry in keyed:
        old = previous.get(pid)
        if old is not None and old.payload.get("content_hash") == entry.content_hash:
            reused[pid] = Point(pid, old.dense, old.sparse, entry.payload(), old.content)
            report.unchanged += 1
        elif old is None:
            report.added += 1
        else:
            report.updated += 1
    ids = {pid for pid, _ in keyed}
    kept = [
        point
        for pid, point in previous.items()
        if pid not in ids and point.payload.get("source_file") not in ingested_files
    ]
    report.removed = len(previous) - len(kept) - report.unchanged - report.updated
    report.total = len(kept) + len(entries)
    payloads = [*(e.payload() for e in entries), *(p.payload for p in kept)]
    report.kind, titles = kb_kind(payloads)
    report.snapshot_id = snapshot_id(
        [
            *((p.id, p.payload["content_hash"]) for p in kept),
            *((p, e.content_hash) for p, e in keyed),
        ]
    )
    store.publish(
        kb,
        itertools.chain(kept, _embedded(keyed, reused, embedder, batch_size, progress)),
        KBInfo(
            name=kb,
            snapshot_id=report.snapshot_id,
            count=report.total,
            dim=embedder.dim,
            description=_display_name(description, old_info, report.kind, titles),
            fallback_url=fallback_url
            if fallback_url is not None
            else (old_info.fallback_url if old_info else None),
            updated_at=datetime.now(UTC).isoformat(timespec="seconds"),
            extra={**screened.extra, KIND: report.kind, DOCUMENTS: titles, **numbered(payloads)},
        ),
    )
    faqs = [(pid, e.title, e.text) for pid, e in keyed if e.kind == "faq"] + [
        (p.id, str(p.payload["question"]), str(p.payload["answer"]))
        for p in kept
        if p.payload.get("kind") == "faq"
    ]
    report.calibration = _calibrated(
        store, kb, report.snapshot_id, old_info, embedder, reranker or FusedReranker(), faqs
    )
    return report


def _calibrated(
    store: VectorStore,
    kb: str,
    snapshot: str,
    old_info: KBInfo | None,
    embedder: Embedder,
    reranker: Reranker,
    faqs: list[tuple[str, str, str]],
) -> Calibration | None:
    """The snapshot's calibration, kept with it; an unchanged snapshot scored by the same
    reranker keeps the one it has."""
    known = Calibration.from_extra(old_info.extra) if old_info is not None else None
    if old_info and old_info.snapshot_id == snapshot and known and known.scorer == reranker.name:
        store.annotate(kb, snapshot, {CALIBRATION: known.to_dict()})
        return known
    if not faqs:  # documents only: nothing to probe with, so no statistics to read for it
        return None
    stats = KBStats.from_texts(snapshot, (point_text(p) for p in store.payloads(kb)))
    found = calibrate(store, kb, snapshot, embedder, reranker, stats, faqs)
    if found is not None:
        store.annotate(kb, snapshot, {CALIBRATION: found.to_dict()})
    return found


def _previous_snapshot(
    store: VectorStore, kb: str, paths: list[Path]
) -> tuple[KBInfo | None, dict[str, Point]]:
    """The KB's live snapshot (info and points), or nothing when its files are damaged: then
    re-ingesting is the repair, and rows of files not given now are not carried over."""
    try:
        info = store.kb_info(kb)
        return info, ({p.id: p for p in store.points(kb)} if info else {})
    except IndexDamaged as exc:
        names = ", ".join(p.name for p in paths)
        log.warning(
            "kb %r: previous snapshot unreadable (%s); rebuilding it from %s", kb, exc, names
        )
        return None, {}
