"""Real documents made on the spot for the reader tests and the document benchmark: a PDF
written with pdfium itself (text objects in Helvetica, sizes, colours, render modes), a Word
file written with python-docx, and a saved web page."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Line:
    """One line of text on a PDF page."""

    text: str
    size: float = 11.0
    white: bool = False
    invisible: bool = False  # PDF render mode 3: drawn nowhere, still in the text layer
    x: float = 72.0


@dataclass(frozen=True)
class Grid:
    """A table drawn with rules: rows of cells (a cell's lines split by "\\n"), column widths
    in points; `box` draws only the outer frame (a boxed paragraph, not a table)."""

    rows: list[list[str]]
    widths: list[float]
    size: float = 10.0
    box: bool = False
    open: bool = False  # rules above, under the header row and below only (no vertical rules)
    white: tuple[int, int] | None = None  # a cell (row, column) drawn in white: hidden text


def make_pdf(path: Path, pages: Sequence[Sequence[Line | Grid]]) -> Path:
    """A PDF of `pages`, each a list of lines (or ruled tables) top to bottom; an empty list is
    a blank page."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    pdf = pdfium.PdfDocument.new()
    for lines in pages:
        page = pdf.new_page(612, 792)
        y = 740.0
        for line in lines:
            if isinstance(line, Grid):
                y = _grid(pdf, page, line, y)
            else:
                _text(pdf, page, line, line.x, y)
                y -= line.size * 1.6
            if y < 60:
                raise ValueError("too many lines for one page")
        raw.FPDFPage_GenerateContent(page.raw)
        page.close()
    pdf.save(str(path))
    pdf.close()
    return path


def _text(pdf: object, page: object, line: Line, x: float, y: float) -> None:
    import pypdfium2.raw as raw

    obj = raw.FPDFPageObj_NewTextObj(pdf.raw, b"Helvetica", ctypes.c_float(line.size))  # type: ignore[attr-defined]
    encoded = (line.text + "\0").encode("utf-16-le")
    buffer = ctypes.create_string_buffer(encoded, len(encoded))
    raw.FPDFText_SetText(obj, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ushort)))
    raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, x, y)
    colour = 255 if line.white else 0
    raw.FPDFPageObj_SetFillColor(obj, colour, colour, colour, 255)
    if line.invisible:
        raw.FPDFTextObj_SetTextRenderMode(obj, 3)
    raw.FPDFPage_InsertObject(page.raw, obj)  # type: ignore[attr-defined]


def _rule(page: object, x0: float, y0: float, x1: float, y1: float) -> None:
    import pypdfium2.raw as raw

    obj = raw.FPDFPageObj_CreateNewPath(x0, y0)
    raw.FPDFPath_LineTo(obj, x1, y1)
    raw.FPDFPageObj_SetStrokeColor(obj, 0, 0, 0, 255)
    raw.FPDFPageObj_SetStrokeWidth(obj, ctypes.c_float(0.75))
    raw.FPDFPath_SetDrawMode(obj, 0, 1)
    raw.FPDFPage_InsertObject(page.raw, obj)  # type: ignore[attr-defined]


def _grid(pdf: object, page: object, grid: Grid, top: float) -> float:
    """Draws `grid` with its top at `top`; returns the y below it."""
    pitch = grid.size * 1.3
    left, right = 72.0, 72.0 + sum(grid.widths)
    edges = [left]
    for width in grid.widths:
        edges.append(edges[-1] + width)
    y = top
    for r, row in enumerate(grid.rows):
        height = max(len(cell.split("\n")) for cell in row) * pitch + 6
        for c, (x, cell) in enumerate(zip(edges, row, strict=False)):
            white = grid.white == (r, c)
            for n, text in enumerate(cell.split("\n")):
                line = Line(text, grid.size, white=white)
                _text(pdf, page, line, x + 4, y - 3 - grid.size - n * pitch)
        if not grid.box and (not grid.open or r < 2):
            _rule(page, left, y, right, y)
        y -= height
    for x in [] if grid.open else [left, right] if grid.box else edges:
        _rule(page, x, top, x, y)
    _rule(page, left, y, right, y)
    if grid.box:
        _rule(page, left, top, right, top)
    return y - grid.size * 1.6


#: Wordings the long report rotates through, so no line but its headings repeats on every page.
_UNITS = ("unit", "branch", "division", "office")
_MEASURES = ("revenue", "sales", "income", "turnover")
_CAUSES = ("new staff", "larger premises", "higher rates", "more travel")


def long_pdf(path: Path, pages: int = 300) -> Path:
    """A report of `pages` pages whose sections all repeat the same headings ("Overview",
    "Results"), with numbered paragraphs and bullet lists, like a long filing."""
    body: list[list[Line]] = [[Line("Annual report of the example group", 24)]]
    for number in range(2, pages + 1):
        part = (number - 1) // 10 + 1
        unit, measure = _UNITS[number % 4], _MEASURES[(number // 4) % 4]
        cause = _CAUSES[(number // 16) % 4]
        lines = [Line(f"Part {part}: the {unit}s", 18)] if number % 10 == 1 else []
        lines += [
            Line("Overview", 14),
            Line(f"{part}.{number}.1 The {unit} reported {measure} of {number * 7} million in"),
            Line(f"the year, against {number * 5} million the year before. Costs of the {unit}"),
            Line(f"rose by {number % 13} percent because of {cause}."),
            Line("Results", 14),
            Line(f"{part}.{number}.2 The {unit} met its targets if it kept all of these:"),
            Line(f"• a {measure} margin above {number % 9 + 3} percent"),
            Line(f"• fewer than {number % 17 + 2} open complaints about the {unit}"),
            Line(f"• an audit of the {unit} without findings. Reviews of {measure} happen"),
            Line(f"twice a year and the board of the {unit} reads every finding."),
        ]
        body.append(lines)
    return make_pdf(path, body)
