"""Reading knowledge-base files: FAQ rows from JSON, JSONL or CSV, documents from Markdown,
text, JSONL, PDF, HTML or Word. Every row is validated; a bad one is an IngestError naming its
file and line (a document's: its file and page or section).

Hostile files are refused the same way: a file, row or field over its size limit, nesting
deeper than the limit, a field that a spreadsheet would run as a formula, or a link that is
not http(s) (see `IngestLimits` and `unsafe_field`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from guardrag.config.settings import load_settings
from guardrag.core.kb.blocks import Document
from guardrag.core.kb.chunking import chunk_sentences, document_entries
from guardrag.core.kb.entries import Entry, IngestError
from guardrag.core.kb.html import read_html
from guardrag.core.kb.pdf import read_pdf
from guardrag.core.kb.structure import document_chunks
from guardrag.core.kb.word import read_docx
from guardrag.core.text import normalise

if TYPE_CHECKING:
    from guardrag.config.settings import Settings

FAQ_FIELDS = ("question", "answer", "id", "url", "category")
DOC_SUFFIXES = {".md", ".markdown", ".txt"}
#: Documents read into blocks and chunked along their structure (kb/structure.py).
READERS: dict[str, Callable[[Path], Document]] = {
    ".pdf": read_pdf,
    ".html": read_html,
    ".htm": read_html,
    ".docx": read_docx,
}
#: Text a spreadsheet runs as a formula when a cell starts with it (OWASP CSV injection): '='
#: always; '+', '-' or '@' only before a function call or a DDE pipe, so bullets ("- Open
#: the app"), phone numbers ("+60 3-1234") and handles ("@kinetic") stay ingestible.
_FORMULA = re.compile(r"^\s*(?:=|[+\-@][^\s(|]*[A-Za-z_][^\s(|]*\(|[+\-@]\S*\|)")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Links that run code in a browser instead of opening a page.
#: A link whose target runs a script: a Markdown link or autolink, or an HTML attribute, whose
#: target is javascript:, vbscript:, livescript: or an HTML data: URL. Prose that only mentions
#: such a scheme (a tech-support FAQ explaining bookmarklets) is no link and is kept; where
#: answers are rendered, links are escaped anyway (faces/views.py).
_SCRIPT_LINK = re.compile(
    r"(?:\]\(\s*<?|<|\b(?:href|src|action|formaction|xlink:href)\s*=\s*[\"']?)\s*"
    r"(?:(?:javascript|vbscript|livescript)\s*:|data\s*:\s*text/html)",
    re.I,
)


@dataclass(frozen=True)
class IngestLimits:
    """Size and shape limits of what ingest reads (GUARDRAG_INGEST_MAX_*)."""

    field_bytes: int = 65_536
    row_bytes: int = 262_144
    file_bytes: int = 268_435_456
    depth: int = 16

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> IngestLimits:
        settings = settings or load_settings()
        return cls(
            field_bytes=settings.ingest_max_field_bytes,
            row_bytes=settings.ingest_max_row_bytes,
            file_bytes=settings.ingest_max_file_bytes,
            depth=settings.ingest_max_depth,
        )


def unsafe_field(name: str, text: str) -> str | None:
    """Why a field's text must not be ingested (a formula, a script link, text that is not
    valid Unicode), or None."""
    if _SURROGATE.search(text):
        return f"field {name!r} is not valid Unicode text (a lone surrogate)"
    if _FORMULA.match(text):
        return (
            f"field {name!r} starts like a spreadsheet formula ({text[:30]!r}): a spreadsheet "
            "opening an export would run it; reword it or quote it"
        )
    if name == "url":
        parsed = urlparse(text)
        if parsed.scheme.lower() not in ("http", "https") or not parsed.netloc:
            return f"url must be an http(s) link, got {text[:60]!r}"
    elif link := _SCRIPT_LINK.search(text):
        return f"field {name!r} holds a link that runs a script ({link.group(0).strip()!r})"
    return None


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in `value` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _row_problem(row: Any, size: int, limits: IngestLimits) -> str | None:
    """Why a parsed row breaks the size or nesting limits, or None."""
    if size > limits.row_bytes:
        return f"row is {size} bytes, over the limit of {limits.row_bytes} (GUARDRAG_INGEST_MAX_ROW_BYTES)"
    if _depth(row) > limits.depth:
        return f"row nests deeper than {limits.depth} levels (GUARDRAG_INGEST_MAX_DEPTH)"
    for key, value in row.items() if isinstance(row, dict) else ():
        length = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0
        if length > limits.field_bytes:
            return (
                f"field {str(key)[:40]!r} is {length} bytes, over the limit of "
                f"{limits.field_bytes} (GUARDRAG_INGEST_MAX_FIELD_BYTES)"
            )
    return None


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


def check_file_size(path: Path, limits: IngestLimits) -> None:
    size = path.stat().st_size
    if size > limits.file_bytes:
        raise IngestError(
            f"{path}: file is {size} bytes, over the limit of {limits.file_bytes} "
            "(GUARDRAG_INGEST_MAX_FILE_BYTES)"
        )


def _records(path: Path, limits: IngestLimits) -> Iterator[tuple[int, Any]]:
    """(line or item number, record) from a JSON array, JSONL or CSV file; a record that breaks
    the limits comes back as the IngestError saying so."""
    try:
        yield from _decoded_records(path, limits)
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None


def _decoded_records(path: Path, limits: IngestLimits) -> Iterator[tuple[int, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        yield from _csv_records(path, limits)
    elif suffix == ".jsonl":
        with path.open(encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, _json_line(line, f"{path}:{number}", limits)
    elif suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as exc:
            raise IngestError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise IngestError(
                f"{path}: nested deeper than {limits.depth} levels (GUARDRAG_INGEST_MAX_DEPTH)"
            ) from None
        if isinstance(data, dict):  # {"entries": [...]} / {"faqs": [...]} wrappers
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else data
        if not isinstance(data, list):
            raise IngestError(f"{path}: expected a JSON array of objects")
        for number, item in enumerate(data, start=1):
            size = len(json.dumps(item, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            problem = _row_problem(item, size, limits)
            yield number, IngestError(f"{path}:{number}: {problem}") if problem else item
    else:
        raise IngestError(
            f"{path}: unsupported file type {suffix!r}; use .json, .jsonl, .csv, .md, .txt, "
            ".pdf, .html or .docx"
        )


def _json_line(line: str, where: str, limits: IngestLimits) -> Any:
    """One JSONL row parsed and checked, or the IngestError (returned) saying what is wrong."""
    size = len(line.encode("utf-8", "surrogatepass"))
    if size > limits.row_bytes:  # before parsing: a 10 MB row costs nothing to refuse
        return IngestError(f"{where}: {_row_problem(None, size, limits)}")
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise IngestError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:  # deeper than the parser goes, so deeper than any limit
        return IngestError(
            f"{where}: row nests deeper than {limits.depth} levels (GUARDRAG_INGEST_MAX_DEPTH)"
        )
    problem = _row_problem(row, size, limits)
    return IngestError(f"{where}: {problem}") if problem else row


def _csv_records(path: Path, limits: IngestLimits) -> Iterator[tuple[int, Any]]:
    # The csv module's own field limit (128 KiB) must not cut in before ours names the row.
    csv.field_size_limit(max(csv.field_size_limit(), limits.row_bytes + 1))
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        try:
            for row in reader:
                size = sum(len(str(v).encode("utf-8", "surrogatepass")) for v in row.values())
                problem = _row_problem(row, size, limits)
                where = f"{path}:{reader.line_num}"
                yield reader.line_num, IngestError(f"{where}: {problem}") if problem else row
        except csv.Error as exc:
            raise IngestError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None


def _field(row: dict[str, Any], name: str, columns: dict[str, str]) -> str | None:
    wanted = columns.get(name, name)
    for key, value in row.items():
        if isinstance(key, str) and key.strip().lower() == wanted:
            if value is None:
                return None
            text = str(value).strip()
            return text or None
    return None


#: Every field ingest reads from a row, checked for formulas and script links.
_READ_FIELDS = (*FAQ_FIELDS, "text", "title", "topic", "source")


def _entries_from_records(
    path: Path, columns: dict[str, str], limits: IngestLimits
) -> Iterator[Entry | IngestError]:
    for number, row in _records(path, limits):
        where = f"{path}:{number}"
        if isinstance(row, IngestError):
            yield row
            continue
        if not isinstance(row, dict):
            yield IngestError(f"{where}: expected an object, got {type(row).__name__}")
            continue
        unsafe = next(
            (
                problem
                for name in _READ_FIELDS
                if (value := _field(row, name, columns)) and (problem := unsafe_field(name, value))
            ),
            None,
        )
        if unsafe:
            yield IngestError(f"{where}: {unsafe}")
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
                    doc_title=source or title,
                    section=title if source else None,
                    label=heading,
                    preamble=False,
                )
        else:
            missing = "answer" if question else "question" if answer else "question and answer"
            yield IngestError(
                f"{where}: row has no {missing} (and no 'text'); columns: {list(row)}"
            )


def _read_document(reader: Callable[[Path], Document], path: Path) -> Document:
    """The reader's document; whatever a library raises on a malformed file becomes an
    IngestError naming the file (a hostile file must not end in a traceback)."""
    try:
        return reader(path)
    except IngestError:
        raise
    except Exception as exc:  # the libraries' own errors for broken files vary by version
        detail = str(exc)[:120] or type(exc).__name__
        raise IngestError(f"{path}: not a readable {path.suffix} file ({detail})") from None


def _document_entries(
    path: Path, limits: IngestLimits, dropped: list[str]
) -> Iterator[Entry | IngestError]:
    """A document's chunks; what its reader left out (hidden text, pages without text) is
    added to `dropped`."""
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        chunks: Iterable[Entry] = document_entries(path)
    else:
        document = _read_document(reader, path)
        dropped.extend(d.line() for d in document.dropped)
        chunks = list(document_chunks(document))
        if not chunks:
            reasons = "; ".join(d.line() for d in document.dropped[:3])
            raise IngestError(f"{path}: no readable text" + (f" ({reasons})" if reasons else ""))
    for entry in chunks:
        size = len(entry.text.encode("utf-8", "surrogatepass"))
        if size > limits.field_bytes:  # one "sentence" with no end: nothing to cut it at
            yield IngestError(
                f"{entry.location}: a passage of {size} bytes, over the limit of "
                f"{limits.field_bytes} (GUARDRAG_INGEST_MAX_FIELD_BYTES)"
            )
        else:
            yield entry


def load_entries(
    paths: Iterable[Path],
    columns: dict[str, str] | None = None,
    skip_bad_rows: bool = False,
    limits: IngestLimits | None = None,
    dropped: list[str] | None = None,
) -> tuple[list[Entry], list[str]]:
    """Parse every source; raise IngestError on the first problem unless `skip_bad_rows`.

    `limits` default to the process settings (GUARDRAG_INGEST_MAX_*). What document readers
    left out (hidden text, pages without a text layer) is added to `dropped` when given."""
    limits = limits or IngestLimits.from_settings()
    entries: list[Entry] = []
    skipped: list[str] = []
    dropped = dropped if dropped is not None else []
    seen: dict[str, str] = {}
    for path in paths:
        if not path.is_file():
            raise IngestError(f"{path}: no such file")
        check_file_size(path, limits)
        items: Iterable[Entry | IngestError] = (
            _document_entries(path, limits, dropped)
            if path.suffix.lower() in DOC_SUFFIXES or path.suffix.lower() in READERS
            else _entries_from_records(path, columns or {}, limits)
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
