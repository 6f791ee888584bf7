"""PDF documents read with pdfium (pypdfium2): text by page, headings by font size.

pdfium gives each page's text in reading order with line breaks, and each character's font
size, fill colour and render mode. Lines are joined into blocks: a line in a larger font than
the body is a heading (its size ranks its level), a line opening with a bullet or a number is
a list item or a numbered recommendation, other lines continue the block before them. Lines
printed on most pages (running headers and footers, "Page 3 of 94") and table-of-contents
lines are boilerplate and left out.

Text a reader of the page cannot see is dropped and reported with its page: invisible render
mode, white or transparent fill, a font under 1 pt, or text placed outside the page. White
text on a dark box would be visible and is still dropped (pdfium does not say what is under
a character). A page without a text layer (a scan) is reported, not silently empty.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardrag.core.kb.blocks import Block, Document, Dropped, clean
from guardrag.core.kb.entries import IngestError
from guardrag.core.kb.pdf_tables import Table, find_tables

_BULLET = re.compile(r"^\s*(?:[•▪◦●○‣⁃∙·*\-–—－]|\(?[a-z]\)|\d{1,2}[.)](?!\d))\s+")
_NUMBERED = re.compile(r"^\s*\d+(?:\.\d+)+\s+\S")
_LEADER = re.compile(r"\.{5,}|…{3,}")
#: A line that cannot open a block: lower case, or a bracketed tag ("[2015]") after a sentence.
_CONTINUES = re.compile(r"^(?:[a-z]|\[[^\]]*\]\s*$)")
_DIGITS = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"[.!?:;]\s*(?:\[[^\]]*\])?\s*$")
#: A line is a running header or footer when it recurs on this share of the pages.
_RUNNING_SHARE = 0.3
#: Running headers and footers are looked for among this many lines at the top and bottom.
_EDGE_LINES = 4
#: Fill colours at or above this on every channel are white; alpha under this is transparent.
_WHITE, _MIN_ALPHA, _MIN_POINTS = 250, 10, 1.0
_RENDER_INVISIBLE = 3


@dataclass
class _Line:
    text: str
    size: float
    page: int
    edge: bool = False  # among the first or last lines of its page
    row: bool = False  # a table row, its cells joined by " | "


def read_pdf(path: Path) -> Document:
    """The document's blocks with their pages; what was hidden or unreadable, reported."""
    import pypdfium2 as pdfium  # lazy: only PDF ingest pays for pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise IngestError(f"{path}: not a readable PDF ({exc})") from None
    try:
        meta = pdf.get_metadata_dict(skip_empty=True)
        document = Document(str(path), "", pages=len(pdf))
        lines: list[_Line] = []
        for number in range(1, len(pdf) + 1):
            lines.extend(_page_lines(pdf, number, path, document))
    finally:
        pdf.close()
    body = _without_running_lines(lines, document.pages)
    document.blocks = _blocks(body, path)
    document.title = _title(meta, document.blocks)
    return document


def _title(meta: dict[str, Any], blocks: list[Block]) -> str:
    """The metadata title (with the subject when it names the title more fully), else the
    first heading."""
    title, subject = clean(str(meta.get("Title", ""))), clean(str(meta.get("Subject", "")))
    if title and subject.startswith(title) and len(subject) > len(title):
        return subject
    if title:
        return title
    return next((b.text for b in blocks if b.kind == "heading"), "")


def _page_lines(pdf: Any, number: int, path: Path, document: Document) -> list[_Line]:
    """One page's visible lines; hidden text and an empty page go to `document.dropped`."""
    import pypdfium2 as pdfium  # lazy: see read_pdf
    import pypdfium2.raw as raw  # lazy: see read_pdf

    where = f"{path}:{number}"
    try:
        page = pdf[number - 1]
        textpage = page.get_textpage()
    except pdfium.PdfiumError as exc:
        raise IngestError(f"{where}: page cannot be read ({exc})") from None
    width, height = page.get_size()
    text = textpage.get_text_range()
    if not text.strip():
        has_images = any(obj.type == raw.FPDF_PAGEOBJ_IMAGE for obj in page.get_objects())
        why = "no text layer (a scanned image? OCR it first)" if has_images else "blank page"
        document.dropped.append(Dropped(where, why))
        return []
    lines: list[_Line] = []
    hidden: list[str] = []
    tables = find_tables(page, textpage.raw)
    start = 0
    for end in [*(i for i, ch in enumerate(text) if ch == "\n"), len(text)]:
        visible, size = _visible(
            textpage.raw, text, (start, end), (width, height), hidden, (tables, len(lines))
        )
        if visible.strip():
            lines.append(_Line(visible.strip(), size, number))
        start = end + 1
    for table in sorted(tables, key=lambda t: -1 if t.anchor is None else t.anchor, reverse=True):
        if table.anchor is not None:
            rows = [_Line(row, 0.0, number, row=True) for row in table.lines()]
            lines[table.anchor : table.anchor] = rows
    for line in lines[:_EDGE_LINES] + lines[-_EDGE_LINES:]:
        line.edge = True
    if hidden:
        document.dropped.append(
            Dropped(
                where, "hidden text dropped (invisible, white or off-page)", clean(" ".join(hidden))
            )
        )
    return lines


def _visible(
    textpage: Any,
    text: str,
    span: tuple[int, int],
    size_of_page: tuple[float, float],
    hidden: list[str],
    tables: tuple[list[Table], int],
) -> tuple[str, float]:
    """The characters of text[start:end] a reader can see, and the line's largest font size.
    A visible character inside a table's cell goes to that cell instead (with the spaces after
    it); a table first written to gets the number of the line being read as its anchor."""
    import pypdfium2.raw as raw  # lazy: see read_pdf

    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    kept: list[str] = []
    gone: list[str] = []
    largest = 0.0
    into: tuple[Table, tuple[int, int]] | None = None  # the cell the last character went to
    for index in range(*span):
        char = text[index]
        if char.isspace():
            gone.append(" ")
            if into is not None:
                into[0].add(into[1], " ")
            else:
                kept.append(" ")
            continue
        points = raw.FPDFText_GetFontSize(textpage, index)
        raw.FPDFText_GetFillColor(textpage, index, r, g, b, a)
        white = min(r.value, g.value, b.value) >= _WHITE or a.value < _MIN_ALPHA
        obj = raw.FPDFText_GetTextObject(textpage, index)
        invisible = bool(obj) and raw.FPDFTextObj_GetTextRenderMode(obj) == _RENDER_INVISIBLE
        raw.FPDFText_GetCharBox(textpage, index, left, right, bottom, top)
        outside = (
            right.value < 0
            or left.value > size_of_page[0]
            or top.value < 0
            or (bottom.value > size_of_page[1])
        )
        if white or invisible or outside or points < _MIN_POINTS:
            gone.append(char)
            continue
        into = _cell(tables, (left.value + right.value) / 2, (bottom.value + top.value) / 2)
        if into is not None:
            into[0].add(into[1], char, bottom.value, points)
            continue
        largest = max(largest, points)
        kept.append(char)
    if into is not None:
        into[0].add(into[1], " ")
    if "".join(gone).strip():
        hidden.append("".join(gone))
    return "".join(kept), largest


def _cell(
    tables: tuple[list[Table], int], x: float, y: float
) -> tuple[Table, tuple[int, int]] | None:
    """The table and cell a point falls in; the table's anchor set to the current line."""
    for table in tables[0]:
        cell = table.cell_at(x, y)
        if cell is not None:
            if table.anchor is None:
                table.anchor = tables[1]
            return table, cell
    return None


def _without_running_lines(lines: list[_Line], pages: int) -> list[_Line]:
    """Lines minus running headers/footers (body-size or smaller lines at the top or bottom
    of many pages: a heading that repeats is kept) and contents leaders."""
    if pages >= 3:
        per_page: dict[str, set[int]] = {}
        headings = _heading_levels(lines)
        edges = (ln for ln in lines if ln.edge and not ln.row and round(ln.size, 1) not in headings)
        for line in edges:
            per_page.setdefault(_DIGITS.sub("#", line.text), set()).add(line.page)
        seen = Counter({key: len(found) for key, found in per_page.items()})
        running = {key for key, count in seen.items() if count >= max(3, _RUNNING_SHARE * pages)}
        lines = [
            ln
            for ln in lines
            if not (
                ln.edge
                and not ln.row
                and round(ln.size, 1) not in headings
                and _DIGITS.sub("#", ln.text) in running
            )
        ]
    return [ln for ln in lines if not _LEADER.search(ln.text)]


def _heading_levels(lines: list[_Line]) -> dict[float, int]:
    """Font sizes larger than the body's, largest first, as heading levels 1, 2, ..."""
    weights = Counter[float]()
    for line in lines:
        if not line.row:
            weights[round(line.size, 1)] += len(line.text)
    if not weights:
        return {}
    body = weights.most_common(1)[0][0]
    larger = sorted((s for s in weights if s > body * 1.15), reverse=True)
    return {size: level for level, size in enumerate(larger, start=1)}


def _blocks(lines: list[_Line], path: Path) -> list[Block]:
    """Lines joined into heading, numbered, list and paragraph blocks."""
    levels = _heading_levels(lines)
    blocks: list[Block] = []
    current: tuple[str, int, int, str] | None = None  # kind, level, page, text

    def flush() -> None:
        if current is not None:
            kind, level, page, text = current
            blocks.append(Block(kind, clean(text), level, page, f"{path}:{page}"))  # type: ignore[arg-type]

    for line in lines:
        level = levels.get(round(line.size, 1), 0)
        if line.row:
            flush()
            current = None
            blocks.append(Block("table_row", line.text, 0, line.page, f"{path}:{line.page}"))
        elif level and len(line.text.split()) <= 20:
            if (
                current
                and current[0] == "heading"
                and current[1] == level
                and (
                    current[2] == line.page  # a heading wrapped onto a second line
                )
            ):
                current = ("heading", level, current[2], f"{current[3]} {line.text}")
                continue
            flush()
            current = ("heading", level, line.page, line.text)
        elif _NUMBERED.match(line.text):
            flush()
            current = ("paragraph", 0, line.page, line.text)
        elif _BULLET.match(line.text):
            flush()
            current = ("list_item", 0, line.page, _BULLET.sub("", line.text, count=1))
        elif (
            current
            and current[0] != "heading"
            and (not _SENTENCE_END.search(current[3]) or _CONTINUES.match(line.text))
        ):
            current = (current[0], 0, current[2], f"{current[3]} {line.text}")
        else:
            flush()
            current = ("paragraph", 0, line.page, line.text)
    flush()
    return blocks
