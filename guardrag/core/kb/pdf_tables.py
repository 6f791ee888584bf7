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

import ctypes
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
#: A gap between columns of a table without vertical rules is at least this many font sizes.
_GAP = 1.0
#: Horizontal rules framing a table without vertical rules span this share of the page at least.
_OPEN_WIDTH = 0.3
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


def find_tables(page: Any, textpage: Any) -> list[Table]:
    """The ruled tables of a pdfium page (and its raw text page), top to bottom."""
    groups = _groups(_rules(page))
    ruled = [_table(g) for g in groups if 0 < sum(r.horizontal for r in g) < len(g)]
    found = [t for t in ruled if t is not None]
    wide = _OPEN_WIDTH * page.get_size()[0]  # a link's underline is no frame
    flat = [
        r
        for g in groups
        if all(r.horizontal for r in g)
        for r in g
        if r.x1 - r.x0 >= wide and not any(t.cell_at(r.x0 + 1, r.y0) for t in found)
    ]
    found += [t for stack in _stacks(flat) for t in _open_tables(stack, textpage)]
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
    return list(groups.values())


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


def _stacks(flat: list[_Rule]) -> list[list[_Rule]]:
    """Horizontal rules crossed by no vertical one, grouped by their span: two or more of the
    same span, one above the other, frame a table whose columns are only spaced apart."""
    stacks: list[list[_Rule]] = []
    for rule in sorted(flat, key=lambda r: (round(r.x0), -r.y0)):
        for stack in stacks:
            first = stack[0]
            if abs(first.x0 - rule.x0) <= _TOUCH and abs(first.x1 - rule.x1) <= _TOUCH:
                stack.append(rule)
                break
        else:
            stacks.append([rule])
    return [s for s in stacks if len(_positions([r.y0 for r in s])) >= 2]


@dataclass(frozen=True)
class _Char:
    """A printed character of a framed region: its box, font size and text."""

    left: float
    right: float
    bottom: float
    top: float
    size: float
    text: str

    @property
    def middle(self) -> float:
        return (self.bottom + self.top) / 2


def _open_tables(stack: list[_Rule], textpage: Any) -> list[Table]:
    """The tables a stack of rules of one span frames: runs of the bands between its rules
    whose text has a column gap (the text between two tables, or a ruled-off note, has none)."""
    left, right = min(r.x0 for r in stack), max(r.x1 for r in stack)
    ys = _positions([r.y0 for r in stack])
    chars = _chars_within(textpage, (left, right, ys[0], ys[-1]))
    runs: list[list[float]] = []
    for low, high in pairwise(ys):
        band = [c for c in chars if low <= c.middle <= high]
        if band and _gaps(band):
            if runs and runs[-1][-1] == low:
                runs[-1].append(high)
            else:
                runs.append([low, high])
    framed = [
        _open_table([c for c in chars if run[0] <= c.middle <= run[-1]], run, (left, right))
        for run in runs
    ]
    return [t for t in framed if t is not None]


def _open_table(chars: list[_Char], ys: list[float], span: tuple[float, float]) -> Table | None:
    """A table framed by horizontal rules (at `ys`) only: its columns are the gaps no character
    of the framed text crosses (at least `_GAP` font sizes wide); its rows are the text lines. A
    line continues the row above (no rule between them) when its first column is empty, or when
    it fills fewer columns than the row's first line and starts in lower case or sits closer to
    the line above than lines usually do (a cell wrapped onto a second line)."""
    left, right = span
    edges = [left, *_gaps(chars), right]
    lines = _text_lines(chars)
    if len(edges) < 3 or len(lines) < 2:
        return None
    pitches = sorted(a[0].middle - b[0].middle for a, b in pairwise(lines))
    usual = pitches[len(pitches) // 2]
    rows: list[tuple[float, float, list[float]]] = []
    filled = 0  # columns the current row's first line fills
    for n, line in enumerate(lines):
        low, high = min(c.bottom for c in line), max(c.top for c in line)
        columns = {sum(1 for e in edges[1:-1] if (c.left + c.right) / 2 > e) for c in line}
        ruled = not rows or any(high <= y <= rows[-1][0] for y in ys)
        close = n > 0 and lines[n - 1][0].middle - line[0].middle < usual - 1.0
        wrapped = len(columns) < filled and (close or line[0].text.islower())
        if not ruled and (0 not in columns or wrapped):
            rows[-1] = (low, rows[-1][1], edges)
        else:
            rows.append((low, high, edges))
            filled = len(columns)
    if len(rows) < 2:
        return None
    # each band reaches halfway to the next row, the outer ones to the frame
    bands = [
        (
            (bottom + rows[i + 1][1]) / 2 if i + 1 < len(rows) else ys[0],
            (rows[i - 1][0] + top) / 2 if i else ys[-1],
            cut,
        )
        for i, (bottom, top, cut) in enumerate(rows)
    ]
    return Table(left, ys[0], right, ys[-1], bands)


def _chars_within(textpage: Any, box: tuple[float, float, float, float]) -> list[_Char]:
    """The page's printed characters whose centre is in `box` (left, right, bottom, top)."""
    import pypdfium2.raw as raw  # lazy: see pdf.read_pdf

    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    found = []
    for index in range(raw.FPDFText_CountChars(textpage)):
        text = chr(raw.FPDFText_GetUnicode(textpage, index) or 32)
        if text.isspace():
            continue
        raw.FPDFText_GetCharBox(textpage, index, left, right, bottom, top)
        x, y = (left.value + right.value) / 2, (bottom.value + top.value) / 2
        if box[0] <= x <= box[1] and box[2] <= y <= box[3]:
            size = raw.FPDFText_GetFontSize(textpage, index)
            found.append(_Char(left.value, right.value, bottom.value, top.value, size, text))
    return found


def _gaps(chars: list[_Char]) -> list[float]:
    """Middles of the vertical strips no character covers, at least `_GAP` font sizes wide."""
    size = sorted(c.size for c in chars)[len(chars) // 2]
    spans = sorted((c.left, c.right) for c in chars)
    middles: list[float] = []
    reach = spans[0][1]
    for start, end in spans[1:]:
        if start - reach >= _GAP * size:
            middles.append((start + reach) / 2)
        reach = max(reach, end)
    return middles


def _text_lines(chars: list[_Char]) -> list[list[_Char]]:
    """Characters grouped into text lines, top to bottom, each line left to right: a character
    whose centre is within half its font size of the line's first character's is on it."""
    lines: list[list[_Char]] = []
    for char in sorted(chars, key=lambda c: -c.middle):
        if lines and abs(lines[-1][0].middle - char.middle) <= char.size / 2:
            lines[-1].append(char)
        else:
            lines.append([char])
    return [sorted(line, key=lambda c: c.left) for line in lines]
