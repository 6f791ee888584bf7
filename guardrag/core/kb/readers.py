"""Reading knowledge-base files: FAQ rows from JSON, JSONL or CSV, documents from Markdown,
text or JSONL. Every row is validated; a bad one is an IngestError naming its file and line."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from guardrag.core.kb.chunking import chunk_sentences, document_entries
from guardrag.core.kb.entries import Entry, IngestError
from guardrag.core.text import normalise

FAQ_FIELDS = ("question", "answer", "id", "url", "category")
DOC_SUFFIXES = {".md", ".markdown", ".txt"}


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
            document_entries(path)
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
