"""Knowledge-base ingest: FAQ rows (JSON, JSONL, CSV) and documents (Markdown, text, JSONL).

Everything is parsed and validated before anything is written, then published as one snapshot:
a bad file or row stops the ingest with its location and leaves the previous snapshot serving.
Point ids derive from the KB and each row's source key, so a re-ingest updates changed rows,
keeps unchanged ones (reusing their vectors) and removes rows deleted from the source.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from guardrag.contract import GuardragError
from guardrag.core.embedder import Embedder
from guardrag.core.guards import scan_passage
from guardrag.core.store import IndexDamaged, KBInfo, Point, VectorStore, bm25
from guardrag.core.text import normalise, question_key

log = logging.getLogger(__name__)

FAQ_FIELDS = ("question", "answer", "id", "url", "category")
DOC_SUFFIXES = {".md", ".markdown", ".txt"}
_NAMESPACE = uuid.UUID("6f6b1d52-5a0e-4c1c-9a55-6c0b7a3f0e11")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
CHUNK_WORDS = 120  # MiniLM reads 256 tokens: ~120 words leaves room for the title prefix
OVERLAP_SENTENCES = 1


class IngestError(GuardragError, ValueError):
    """A source file or row cannot be ingested; the message names the file and line."""


@dataclass(frozen=True)
class Entry:
    """One unit of knowledge before embedding: an FAQ row or a document chunk."""

    kind: str  # "faq" | "doc"
    source_id: str
    title: str  # the FAQ question, or "document title > section"
    text: str  # the FAQ answer, or the chunk text
    source_file: str
    location: str  # "file:line" for messages
    url: str | None = None
    category: str | None = None

    @property
    def embed_text(self) -> str:
        """The title vector: FAQ entries are matched question-to-question, chunks by titled text."""
        return self.title if self.kind == "faq" else f"{self.title}\n{self.text}"

    @property
    def sparse_text(self) -> str:
        return f"{self.title}\n{self.text}"

    @property
    def content_hash(self) -> str:
        body = "\x00".join((self.kind, self.title, self.text, self.url or "", self.category or ""))
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def payload(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source_id": self.source_id,
            "title": self.title,
            "question": self.title if self.kind == "faq" else None,
            "answer": self.text if self.kind == "faq" else None,
            "text": self.text,
            "url": self.url,
            "category": self.category,
            "question_norm": normalise(self.title) if self.kind == "faq" else None,
            "question_key": question_key(self.title) if self.kind == "faq" else None,
            "content_hash": self.content_hash,
            "source_file": self.source_file,
        }


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
        return text


def parse_columns(spec: str | None) -> dict[str, str]:
    """`question=Q,answer=A` -> {"question": "q", "answer": "a"} (source names lower-cased)."""
    mapping: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(","))):
        ours, sep, theirs = part.partition("=")
        if not sep or ours.strip().lower() not in (*FAQ_FIELDS, "text", "title"):
            raise IngestError(
                f"--columns: expected FIELD=COLUMN with FIELD in {', '.join(FAQ_FIELDS)}, text, "
                f"title; got {part!r}"
            )
        mapping[ours.strip().lower()] = theirs.strip().lower()
    return mapping


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line or item number, record) from a JSON array, JSONL or CSV file."""
    try:
        yield from _decoded_records(path)
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    except csv.Error as exc:
        raise IngestError(f"{path}: malformed CSV ({exc})") from None


def _decoded_records(path: Path) -> Iterator[tuple[int, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8-sig") as handle:
            for number, row in enumerate(csv.DictReader(handle), start=2):
                yield number, row
    elif suffix == ".jsonl":
        with path.open(encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        yield number, json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise IngestError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as exc:
            raise IngestError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if isinstance(data, dict):  # {"entries": [...]} / {"faqs": [...]} wrappers
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else data
        if not isinstance(data, list):
            raise IngestError(f"{path}: expected a JSON array of objects")
        yield from enumerate(data, start=1)
    else:
        raise IngestError(
            f"{path}: unsupported file type {suffix!r}; use .json, .jsonl, .csv, .md or .txt"
        )


def _field(row: dict[str, Any], name: str, columns: dict[str, str]) -> str | None:
    wanted = columns.get(name, name)
    for key, value in row.items():
        if isinstance(key, str) and key.strip().lower() == wanted:
            if value is None:
                return None
            text = str(value).strip()
            return text or None
    return None


def _entries_from_records(path: Path, columns: dict[str, str]) -> Iterator[Entry | IngestError]:
    for number, row in _records(path):
        where = f"{path}:{number}"
        if not isinstance(row, dict):
            yield IngestError(f"{where}: expected an object, got {type(row).__name__}")
            continue
        question, answer = _field(row, "question", columns), _field(row, "answer", columns)
        text = _field(row, "text", columns)
        row_id = _field(row, "id", columns)
        url, category = _field(row, "url", columns), _field(row, "category", columns)
        if question and answer:
            yield Entry(
                kind="faq",
                source_id=row_id
                or f"faq-{hashlib.sha256(normalise(question).encode()).hexdigest()[:10]}",
                title=question,
                text=answer,
                source_file=str(path),
                location=where,
                url=url,
                category=category,
            )
        elif text:
            doc_id = row_id or f"{path.stem}-{number}"
            title = _field(row, "title", columns) or _field(row, "topic", columns) or doc_id
            source = _field(row, "source", columns)
            heading = f"{source} > {title}" if source else title
            for index, chunk in enumerate(chunk_sentences(text)):
                yield Entry(
                    kind="doc",
                    source_id=doc_id if index == 0 else f"{doc_id}#{index}",
                    title=heading,
                    text=chunk,
                    source_file=str(path),
                    location=where,
                    url=url,
                    category=category or _field(row, "topic", columns),
                )
        else:
            missing = "answer" if question else "question" if answer else "question and answer"
            yield IngestError(
                f"{where}: row has no {missing} (and no 'text'); columns: {list(row)}"
            )


def chunk_sentences(text: str, max_words: int = CHUNK_WORDS) -> list[str]:
    """Pack sentences into chunks of at most `max_words`, overlapping by one sentence."""
    sentences = [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if s.strip()]
    chunks: list[str] = []
    current: list[str] = []
    for sentence in sentences:
        if current and sum(len(s.split()) for s in [*current, sentence]) > max_words:
            chunks.append(" ".join(current))
            current = current[-OVERLAP_SENTENCES:] if OVERLAP_SENTENCES else []
            if sum(len(s.split()) for s in [*current, sentence]) > max_words:
                current = []
        current.append(sentence)
    if current:
        chunks.append(" ".join(current))
    return chunks


def _document_entries(path: Path) -> Iterator[Entry]:
    """Markdown/text split along headings, then sentences; each chunk titled by its heading path."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise IngestError(f"{path}: not UTF-8 text") from None
    doc_title = path.stem.replace("_", " ").replace("-", " ")
    headings: list[str] = []
    sections: list[tuple[str, int, list[str]]] = [("", 1, [])]
    for number, line in enumerate(lines, start=1):
        match = _HEADING.match(line)
        if match:
            level = len(match.group(1))
            if level == 1 and not headings and not any(s[2] for s in sections):
                doc_title = match.group(2)
                continue
            headings = [*headings[: level - 2], match.group(2)] if level > 1 else [match.group(2)]
            sections.append((" > ".join(headings), number, []))
        else:
            sections[-1][2].append(line)
    for section, line_number, body in sections:
        for paragraph_chunk_index, chunk in enumerate(chunk_sentences("\n".join(body))):
            slug = re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-") or "intro"
            yield Entry(
                kind="doc",
                source_id=f"{path.stem}#{slug}-{paragraph_chunk_index}",
                title=f"{doc_title} > {section}" if section else doc_title,
                text=chunk,
                source_file=str(path),
                location=f"{path}:{line_number}",
            )


def load_entries(
    paths: Iterable[Path], columns: dict[str, str] | None = None, skip_bad_rows: bool = False
) -> tuple[list[Entry], list[str]]:
    """Parse every source; raise IngestError on the first problem unless `skip_bad_rows`."""
    entries: list[Entry] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    for path in paths:
        if not path.is_file():
            raise IngestError(f"{path}: no such file")
        items: Iterable[Entry | IngestError] = (
            _document_entries(path)
            if path.suffix.lower() in DOC_SUFFIXES
            else _entries_from_records(path, columns or {})
        )
        for item in items:
            if isinstance(item, Entry) and item.source_id in seen:
                item = IngestError(
                    f"{item.location}: duplicate id {item.source_id!r} (first at {seen[item.source_id]})"
                )
            if isinstance(item, IngestError):
                if not skip_bad_rows:
                    raise item
                skipped.append(str(item))
                continue
            seen[item.source_id] = item.location
            entries.append(item)
    if not entries:
        raise IngestError("no entries found in " + ", ".join(str(p) for p in paths))
    return entries, skipped


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


def _quarantined(
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
) -> IngestReport:
    """Parse, embed and publish `paths` into `kb` as one new snapshot.

    Rows from other source files already in the KB are kept; rows of these files that are gone
    from the source are removed. Vectors of unchanged rows are reused, not recomputed. Rows are
    embedded `batch_size` at a time while the store writes them; `progress` hears of each batch.
    """
    paths = [p.resolve() for p in paths]
    entries, skipped = load_entries(paths, columns, skip_bad_rows)
    entries, entries_flagged = quarantine(entries)
    flagged = [f"{e.location} {e.source_id}: {why}" for e, why in entries_flagged]
    old_info, previous = _previous_snapshot(store, kb, paths)
    ingested_files = {str(p) for p in paths}

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
            description=description
            if description is not None
            else (old_info.description if old_info else ""),
            fallback_url=fallback_url
            if fallback_url is not None
            else (old_info.fallback_url if old_info else None),
            updated_at=datetime.now(UTC).isoformat(timespec="seconds"),
            extra={"quarantined": _quarantined(old_info, ingested_files, entries_flagged)},
        ),
    )
    return report


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
