"""The one shape every document reader produces: a title and an ordered list of text blocks.

A block is a heading, a paragraph, a list item or a table row, with where it came from (a PDF
page, a line of a Markdown file, the heading path in HTML and Word). What a reader could not
or would not read (a page without a text layer, text a reader of the page cannot see) is kept
as a `Dropped` note with its location, so ingest reports it instead of losing it silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

BlockKind = Literal["heading", "paragraph", "list_item", "table_row"]

#: A short code in parentheses at the end of a title ("... referral (NG12)", "(10-K)"): the name
#: a citation uses for the document when the title has one.
_CODE = re.compile(r"\(([A-Z][A-Za-z0-9./-]{1,15})\)\s*$")


@dataclass(frozen=True)
class Block:
    """One unit of a document's text, in reading order."""

    kind: BlockKind
    text: str
    level: int = 0  # heading level (1 = top); 0 for the other kinds
    page: int | None = None  # 1-based PDF page
    where: str = ""  # "file:page" / "file:line" / "file#heading" for messages


@dataclass(frozen=True)
class Dropped:
    """Text a reader left out on purpose, and why (hidden text, an unreadable page)."""

    where: str
    why: str
    text: str = ""

    def line(self) -> str:
        shown = f": {self.text[:80]!r}" if self.text else ""
        return f"{self.where}: {self.why}{shown}"


@dataclass
class Document:
    """A document as read: its title, its blocks and what was left out."""

    path: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    pages: int = 0  # PDF pages read (0 for formats without pages)

    @property
    def short_name(self) -> str:
        """What a citation calls the document: a code the title ends with, else the title."""
        match = _CODE.search(self.title)
        return match.group(1) if match else self.title


#: Words of a table's caption at most.
CAPTION_WORDS = 25


def is_caption(text: str) -> bool:
    """A line that can caption the table right below it: short, with no sentence end
    ("Table 1 Age-specific PSA thresholds ...", "Vulval symptoms")."""
    return len(text.split()) <= CAPTION_WORDS and not text.rstrip().endswith((".", "!", "?"))


def clean(text: str) -> str:
    """Whitespace folded to single spaces (readers hand over line-broken text)."""
    return " ".join(text.split())


def title_from_stem(stem: str) -> str:
    return stem.replace("_", " ").replace("-", " ").strip() or stem
