"""Word documents (.docx) read with python-docx: paragraphs and tables in body order, headings
from the paragraph styles, list items from list styles or numbering.

Runs a reader of the document cannot see are dropped and reported with the heading they sit
under: hidden text (Word's "Hidden" font effect, `w:vanish`), white text and text under
1 pt.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from guardrag.core.kb.blocks import Block, Document, Dropped, clean
from guardrag.core.kb.entries import IngestError

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.I)
_WHITE = {"FFFFFF", "FEFEFE"}
_MIN_POINTS = 1.0


def read_docx(path: Path) -> Document:
    """The document's blocks under their headings; hidden runs reported."""
    import docx  # lazy: only Word ingest pays for python-docx
    from docx.table import Table  # lazy: see above
    from docx.text.paragraph import Paragraph  # lazy: see above

    try:
        word = docx.Document(str(path))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise IngestError(f"{path}: not a readable Word (.docx) file ({exc})") from None
    document = Document(str(path), clean(word.core_properties.title or ""))
    heading = ""
    for item in word.iter_inner_content():
        if isinstance(item, Table):
            for row in item.rows:
                cells = list(dict.fromkeys(clean(c.text) for c in row.cells))
                if any(cells):
                    where = f"{path}#{heading or 'start'}"
                    document.blocks.append(Block("table_row", " | ".join(cells), 0, None, where))
        elif isinstance(item, Paragraph):
            block = _paragraph(item, path, heading, document)
            if block is not None:
                document.blocks.append(block)
                heading = block.text if block.kind == "heading" else heading
    if not document.title:
        document.title = next((b.text for b in document.blocks if b.kind == "heading"), path.stem)
    return document


def _paragraph(paragraph: Any, path: Path, heading: str, document: Document) -> Block | None:
    where = f"{path}#{heading or 'start'}"
    shown: list[str] = []
    hidden: list[str] = []
    for run in paragraph.runs:
        (hidden if _invisible(run) else shown).append(run.text)
    if any(t.strip() for t in hidden):
        document.dropped.append(Dropped(where, "hidden text dropped", clean(" ".join(hidden))))
    text = clean("".join(shown)) if paragraph.runs else clean(paragraph.text)
    if not text:
        return None
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if style.lower() == "title":
        return Block("heading", text, 1, None, where)
    if match := _HEADING_STYLE.match(style):
        return Block("heading", text, int(match.group(1)) + 1, None, where)
    numbered = paragraph._p.pPr is not None and paragraph._p.pPr.numPr is not None
    if numbered or style.lower().startswith("list"):
        return Block("list_item", text, 0, None, where)
    return Block("paragraph", text, 0, None, where)


def _invisible(run: Any) -> bool:
    font = run.font
    if font.hidden:
        return True
    if font.size is not None and font.size.pt < _MIN_POINTS:
        return True
    color = font.color
    return color is not None and color.type is not None and str(color.rgb) in _WHITE
