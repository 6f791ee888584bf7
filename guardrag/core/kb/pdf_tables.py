"""Ruled tables on a PDF page, found from the lines drawn on it, read back as rows of cells.

pdfium's page text has no table structure: a table's cells come out one after the other, so a
row cannot be told from the next. The rules a table is drawn with can: thin path objects
(strokes, or rectangles under 2 pt thick) and the edges of rectangles. Horizontal and
vertical rules that cross one another form a grid; each set of crossing rules is one table.
Its rows are the bands between its horizontal rules, and a row's cells the spans between the
vertical rules that cross that row (so a cell spanning several columns stays one cell). A
grid without two rows, or without a row of two cells, is a box around text, not a table.

Each visible character whose centre falls in a cell is added to that cell (pdf.py decides
what is visible); a row is its non-empty cells joined by ` | ` as the HTML and Word readers
join them, and the table's first row is its header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

#: A path this thin (pt) is a rule; rectangles thicker than this give their four edges.
_THIN = 2.0
#: Rules meet when they come this close (pt); rule positions this close are one position.
_TOUCH = 2.5
#: Paths with more segments than a rectangle (curves, glyph outlines, drawings) are not rules.
_MOST_SEGMENTS = 6
#: A character this many font sizes below the one before starts a new line.
_NEW_LINE = 0.6
#: A rectangle covering this share of the page is a page background, not a table's.
_BACKGROUND = 0.8


@dataclass(frozen=True)
class _Rule:
    """A horizontal (y0 == y1) or vertical (x0 == x1) segment in page coordinates."""

    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def horizontal(self) -> bool:
        return self.y0 == self.y1

    def meets(self, other: _Rule) -> bool:
        across, along = (self, other) if self.horizontal else (other, self)
        return (
            across.x0 - _TOUCH <= along.x0 <= across.x1 + _TOUCH
            and along.y0 - _TOUCH <= across.y0 <= along.y1 + _TOUCH
        )


@dataclass
class Table:
    """One ruled table: its row bands (bottom, top, column edges) and what its cells hold."""

    left: float
    bottom: float
    right: float
    top: float
    rows: list[tuple[float, float, list[float]]]
    cells: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    #: the bottom of the last character each cell got
    last: dict[tuple[int, int], float] = field(default_factory=dict)
    anchor: int | None = None  # index of the page line the table's text first came at

    def cell_at(self, x: float, y: float) -> tuple[int, int] | None:
        if not (self.left <= x <= self.right and self.bottom <= y <= self.top):
            return None
        for row, (bottom, top, edges) in enumerate(self.rows):
            if bottom <= y <= top:
                column = sum(1 for edge in edges[1:-1] if x > edge)
                return row, column
        return None

    def add(self, cell: tuple[int, int], text: str, bottom: float = 0.0, size: float = 0.0) -> None:
        """`text` into `cell`; a character (with its bottom and font size) that starts a new
        line of the cell gets a space before it (pdfium does not always put one there)."""
        held = self.cells.setdefault(cell, [])
        if size:
            before = self.last.get(cell)
            if before is not None and bottom < before - _NEW_LINE * size:
                held.append(" ")
            self.last[cell] = bottom
        held.append(text)

    def lines(self) -> list[str]:
        """Each row with text: its non-empty cells joined by ` | `."""
        out: list[str] = []
        for row, (_, _, edges) in enumerate(self.rows):
            cells = [
                " ".join("".join(self.cells.get((row, c), [])).split())
                for c in range(len(edges) - 1)
            ]
            if any(cells):
                out.append(" | ".join(cell for cell in cells if cell))
        return out


def find_tables(page: Any) -> list[Table]:
    """The ruled tables of a pdfium page, top to bottom."""
    rules = _rules(page)
    tables = [_table(group) for group in _groups(rules)]
    found = [t for t in tables if t is not None]
    return sorted(found, key=lambda t: -t.top)


def _rules(page: Any) -> list[_Rule]:
    import pypdfium2 as pdfium  # lazy: see pdf.read_pdf
    import pypdfium2.raw as raw  # lazy: see pdf.read_pdf

    width, height = page.get_size()
    rules: list[_Rule] = []
    for obj in page.get_objects(filter=(raw.FPDF_PAGEOBJ_PATH,), max_depth=2):
        segments = raw.FPDFPath_CountSegments(obj.raw)
        if not 0 < segments <= _MOST_SEGMENTS or _curved(obj.raw, segments):
            continue
        try:
            left, bottom, right, top = obj.get_bounds()
        except pdfium.PdfiumError:  # an object pdfium cannot place is no rule
            continue
        w, h = right - left, top - bottom
        if w * h >= _BACKGROUND * width * height:
            continue
        if h <= _THIN and w > _THIN:
            rules.append(_Rule(left, (bottom + top) / 2, right, (bottom + top) / 2))
        elif w <= _THIN and h > _THIN:
            rules.append(_Rule((left + right) / 2, bottom, (left + right) / 2, top))
        elif w > _THIN and h > _THIN:
            rules += [
                _Rule(left, bottom, right, bottom),
                _Rule(left, top, right, top),
                _Rule(left, bottom, left, top),
                _Rule(right, bottom, right, top),
            ]
    return rules


def _curved(path: Any, segments: int) -> bool:
    import pypdfium2.raw as raw  # lazy: see pdf.read_pdf

    return any(
        raw.FPDFPathSegment_GetType(raw.FPDFPath_GetPathSegment(path, i))
        == raw.FPDF_SEGMENT_BEZIERTO
        for i in range(segments)
    )


def _groups(rules: list[_Rule]) -> list[list[_Rule]]:
    """Rules that cross one another, transitively (union-find over crossing pairs)."""
    parent = list(range(len(rules)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    flat = [i for i, r in enumerate(rules) if r.horizontal]
    upright = [i for i, r in enumerate(rules) if not r.horizontal]
    for i in flat:
        for j in upright:
            if rules[i].meets(rules[j]):
                parent[root(i)] = root(j)
    groups: dict[int, list[_Rule]] = {}
    for i in flat + upright:
        groups.setdefault(root(i), []).append(rules[i])
    return [
        g
        for g in groups.values()
        if any(r.horizontal for r in g) and any(not r.horizontal for r in g)
    ]


def _positions(values: list[float]) -> list[float]:
    """Sorted positions with those closer than _TOUCH merged."""
    merged: list[float] = []
    for value in sorted(values):
        if merged and value - merged[-1] <= _TOUCH:
            continue
        merged.append(value)
    return merged


def _table(group: list[_Rule]) -> Table | None:
    left = min(r.x0 for r in group)
    right = max(r.x1 for r in group)
    bottom = min(r.y0 for r in group)
    top = max(r.y1 for r in group)
    ys = _positions([bottom, top, *(r.y0 for r in group if r.horizontal)])
    rows: list[tuple[float, float, list[float]]] = []
    for low, high in pairwise(ys):
        middle = (low + high) / 2
        crossing = [r.x0 for r in group if not r.horizontal and r.y0 <= middle <= r.y1]
        edges = _positions([left, right, *crossing])
        rows.append((low, high, edges))
    rows.reverse()  # top row first
    if len(rows) < 2 or not any(len(edges) > 2 for _, _, edges in rows):
        return None
    return Table(left, bottom, right, top, rows)
