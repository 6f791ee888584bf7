"""Markdown and text documents cut into passages: along headings, then sentences, with one
sentence of overlap. A heading path that repeats gets its occurrence in the chunk id, and the
text before the first section heading is marked as the document's opening (`preamble`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from guardrag.core.kb.asides import aside_of
from guardrag.core.kb.entries import Entry, IngestError

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
CHUNK_WORDS = 120  # MiniLM reads 256 tokens: ~120 words leaves room for the title prefix
OVERLAP_SENTENCES = 1


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


def document_entries(path: Path) -> Iterator[Entry]:
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
    occurrences: dict[str, int] = {}
    for section, line_number, body in sections:
        slug = re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-") or "intro"
        # A heading path that came before (a filing's many "Overview"s) gets its occurrence.
        occurrences[slug] = occurrences.get(slug, 0) + 1
        if occurrences[slug] > 1:
            slug = f"{slug}~{occurrences[slug]}"
        for paragraph_chunk_index, chunk in enumerate(chunk_sentences("\n".join(body))):
            yield Entry(
                kind="doc",
                source_id=f"{path.stem}#{slug}-{paragraph_chunk_index}",
                title=f"{doc_title} > {section}" if section else doc_title,
                text=chunk,
                source_file=str(path),
                location=f"{path}:{line_number}",
                doc_title=doc_title,
                section=section or None,
                label=f"{doc_title} > {section}" if section else doc_title,
                preamble=not section,
                aside=aside_of(section.split(" > ")) if section else None,
            )
