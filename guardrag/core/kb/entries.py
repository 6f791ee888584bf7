"""One unit of knowledge before it is indexed: an FAQ row or a document chunk."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from guardrag.contract import GuardragError
from guardrag.core.text import normalise, question_key


class IngestError(GuardragError, ValueError):
    """A source file or row cannot be ingested; the message names the file and line."""


@dataclass(frozen=True)
class Entry:
    """One unit of knowledge before embedding: an FAQ row or a document chunk."""

    kind: str  # "faq" | "doc"
    source_id: str
    title: str  # the FAQ question, or "document title > section"
    text: str  # the FAQ answer, or the chunk text
    source_file: str
    location: str  # "file:line" for messages
    url: str | None = None
    category: str | None = None
    # Documents only: where the chunk is, for citations ("NG12 p.16", "Policy > Sharing").
    doc_title: str | None = None
    page: int | None = None
    section: str | None = None
    label: str | None = None
    preamble: bool = False  # the document's opening (title page, introduction): not an answer
    aside: str | None = None  # a part that is not an answer (guardrag.core.kb.asides)

    @property
    def embed_text(self) -> str:
        """The title vector: FAQ entries are matched question-to-question, chunks by titled text."""
        return self.title if self.kind == "faq" else f"{self.title}\n{self.text}"

    @property
    def sparse_text(self) -> str:
        return f"{self.title}\n{self.text}"

    @property
    def content_hash(self) -> str:
        parts = [self.kind, self.title, self.text, self.url or "", self.category or ""]
        if self.label is not None:  # documents only, so FAQ rows keep the hashes they had
            parts += [self.label, str(self.page or ""), "preamble" if self.preamble else ""]
            parts += [self.aside] if self.aside else []
        body = "\x00".join(parts)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def payload(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source_id": self.source_id,
            "title": self.title,
            "question": self.title if self.kind == "faq" else None,
            "answer": self.text if self.kind == "faq" else None,
            "text": self.text,
            "url": self.url,
            "category": self.category,
            "question_norm": normalise(self.title) if self.kind == "faq" else None,
            "question_key": question_key(self.title) if self.kind == "faq" else None,
            "content_hash": self.content_hash,
            "source_file": self.source_file,
            **(
                {
                    "doc_title": self.doc_title,
                    "page": self.page,
                    "section": self.section,
                    "label": self.label,
                    "preamble": self.preamble,
                    "aside": self.aside,
                }
                if self.kind == "doc"
                else {}
            ),
        }
