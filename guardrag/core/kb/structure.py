"""A read document cut into chunks along its own structure, each a KB entry with its citation.

Headings set a chunk's section path; a numbered recommendation ("1.3.4 Refer people ...")
starts its own chunk; a list stays with the sentence that leads into it ("... if they:"),
and a list too long for one chunk is split with that lead-in repeated at the head of every
piece; table rows are grouped with the table's first row repeated as their header (under the
table's caption: a short line with no sentence end just before it). Other
paragraphs are packed by sentence as the Markdown chunker does.

Chunk ids are the file's stem, the section's slug and the chunk's number in the section; a
section whose heading path came before (a filing repeats "Overview" dozens of times) gets
its occurrence added ("overview~2"), so ids stay unique, and stable while the document's
order is. Chunks before the document's first section heading are its opening (title page,
preamble) and are marked `preamble`, and when the document has sections the aside `opening`
too; chunks under a research-recommendations or update-information heading are marked with
that aside (guardrag.core.kb.asides).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from guardrag.core.kb.asides import OPENING, aside_of
from guardrag.core.kb.blocks import Block, Document, is_caption
from guardrag.core.kb.chunking import CHUNK_WORDS, chunk_sentences
from guardrag.core.kb.entries import Entry

_NUMBERED = re.compile(r"^\d+(?:\.\d+)+\s")


@dataclass
class _Unit:
    """Blocks that belong together: a lead paragraph and its list, or table rows."""

    kind: str  # "numbered" | "paragraph" | "list" | "table"
    lead: str
    items: list[str] = field(default_factory=list)
    page: int | None = None
    pages: list[int | None] = field(default_factory=list)  # each item's page

    def item(self, text: str, page: int | None) -> None:
        self.items.append(text)
        self.pages.append(page)

    def words(self) -> int:
        return len(self.lead.split()) + sum(len(i.split()) for i in self.items)


@dataclass
class _Section:
    path: list[str]
    page: int | None
    units: list[_Unit] = field(default_factory=list)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _is_title(block: Block, title: str) -> bool:
    return bool(block.text) and title.lower().startswith(block.text.lower())


def _sections(document: Document) -> list[_Section]:
    """Blocks grouped under their heading paths. The title heading is not a section, and the
    other headings of a title page (before any text) are the document's opening text."""
    sections = [_Section([], None)]
    path: list[tuple[int, str]] = []
    title_page: int | None = None
    for block in document.blocks:
        opening = not path and not sections[-1].units
        if (
            block.kind == "heading"
            and opening
            and title_page is None
            and _is_title(block, document.title)
        ):
            title_page = block.page if block.page is not None else -1
            continue
        if (
            block.kind == "heading"
            and opening
            and title_page is not None
            and block.page == title_page
        ):
            block = Block("paragraph", block.text, 0, block.page, block.where)
        if block.kind == "heading":
            path = [(lvl, t) for lvl, t in path if lvl < block.level] + [(block.level, block.text)]
            sections.append(_Section([t for _, t in path], block.page))
            continue
        _add(sections[-1], block)
    return [s for s in sections if s.units]


def _add(section: _Section, block: Block) -> None:
    last = section.units[-1] if section.units else None
    if block.kind == "list_item" and last is not None and last.kind != "table":
        last.kind = "list" if last.kind == "paragraph" else last.kind
        last.item(block.text, block.page)
    elif block.kind == "table_row" and last is not None and last.kind == "table":
        if block.text != last.lead.splitlines()[-1]:  # a header repeated on the next page
            last.item(block.text, block.page)
    elif block.kind == "table_row" and last is not None and _caption(last):
        last.kind, last.lead = "table", f"{last.lead}\n{block.text}"  # the caption over the header
    else:
        kind = {"table_row": "table", "list_item": "list"}.get(block.kind, "paragraph")
        if kind == "paragraph" and _NUMBERED.match(block.text):
            kind = "numbered"
        lead = "" if kind == "list" else block.text
        unit = _Unit(kind, lead, page=block.page)
        if kind == "list":
            unit.item(block.text, block.page)
        section.units.append(unit)


def _caption(unit: _Unit) -> bool:
    """A short paragraph with no sentence end just before a table is its caption."""
    return unit.kind == "paragraph" and is_caption(unit.lead)


def _render(lead: str, items: list[str], table: bool) -> str:
    if table:
        return "\n".join([lead, *items]) if lead else "\n".join(items)
    listed = "\n".join(f"- {item}" for item in items)
    return f"{lead}\n{listed}" if lead and listed else lead or listed


def _unit_chunks(unit: _Unit, max_words: int) -> list[tuple[str, int | None]]:
    """One unit's chunks and their pages: whole when it fits; else its items in groups under
    the lead-in, each group after the first on its first item's page."""
    table = unit.kind == "table"
    if unit.words() <= max_words:
        return [(_render(unit.lead, unit.items, table), unit.page)]
    if not unit.items:
        return [(c, unit.page) for c in chunk_sentences(unit.lead, max_words)]
    lead = unit.lead if len(unit.lead.split()) <= max_words // 2 else ""
    chunks = [] if lead else [(c, unit.page) for c in chunk_sentences(unit.lead, max_words)]
    group: list[str] = []
    page = unit.page
    for item, item_page in zip(unit.items, unit.pages, strict=True):
        if group and len(lead.split()) + sum(len(i.split()) for i in [*group, item]) > max_words:
            chunks.append((_render(lead, group, table), page))
            group = []
        if not group and chunks:
            page = item_page
        group.append(item)
    if group:
        chunks.append((_render(lead, group, table), page))
    return chunks


def _fit(text: str, max_words: int) -> list[str]:
    """A chunk with no sentence ends to cut at (a table's cells, a run-on list) cut by words."""
    words = text.split(" ")
    if len(words) <= 2 * max_words:
        return [text]
    return [" ".join(words[i : i + max_words]) for i in range(0, len(words), max_words)]


def _section_chunks(section: _Section, max_words: int) -> Iterator[tuple[str, int | None]]:
    """(chunk text, first page) of a section: numbered units and lists alone, prose packed."""
    for text, page in _raw_section_chunks(section, max_words):
        yield from ((piece, page) for piece in _fit(text, max_words))


def _raw_section_chunks(section: _Section, max_words: int) -> Iterator[tuple[str, int | None]]:
    prose: list[str] = []
    prose_page: int | None = None
    for unit in section.units:
        if unit.kind == "paragraph" and not unit.items:
            if not prose:
                prose_page = unit.page
            prose.append(unit.lead)
            continue
        if prose:
            yield from ((c, prose_page) for c in chunk_sentences(" ".join(prose), max_words))
            prose = []
        yield from _unit_chunks(unit, max_words)
    if prose:
        yield from ((c, prose_page) for c in chunk_sentences(" ".join(prose), max_words))


def document_chunks(
    document: Document, max_words: int = CHUNK_WORDS, location: str = "page"
) -> Iterator[Entry]:
    """Entries of a read document, each titled, labelled and located for its citation."""
    path = Path(document.path)
    occurrences: dict[str, int] = {}
    short = document.short_name or path.stem
    title = document.title or path.stem
    sections = _sections(document)
    sectioned = any(s.path for s in sections)
    for section in sections:
        heading = " > ".join(section.path)
        aside = aside_of(section.path) if section.path else (OPENING if sectioned else None)
        key = slug(heading) or "intro"
        occurrences[key] = occurrences.get(key, 0) + 1
        if occurrences[key] > 1:
            key = f"{key}~{occurrences[key]}"
        for index, (text, page) in enumerate(_section_chunks(section, max_words)):
            label = (
                f"{short} p.{page}"
                if page is not None
                else (f"{short} > {heading}" if heading else short)
            )
            yield Entry(
                kind="doc",
                source_id=f"{path.stem}#{key}-{index}",
                title=f"{title} > {heading}" if heading else title,
                text=text,
                source_file=str(path),
                location=f"{path}:{page}" if page is not None else f"{path}#{key}",
                doc_title=title,
                page=page,
                section=heading or None,
                label=label,
                preamble=not section.path,
                aside=aside,
            )
