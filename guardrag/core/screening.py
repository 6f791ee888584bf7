"""Screening a question before anything reads it: the input guard's first finding, and the
question's embedding for every later stage, with personal values masked in "redact" mode.

The moderate_input node screens the customer's own words; contextualize and rephrase screen
the questions they write on the customer's behalf through the same function, so a rewrite is
never trusted more than what the customer typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from guardrag.core.guards.ingest.passages import servable
from guardrag.core.store import IndexUnavailable
from guardrag.core.text import normalise

if TYPE_CHECKING:
    from guardrag.core.embedder import Embedder
    from guardrag.core.guards import InputGuard
    from guardrag.core.guards.finding import GuardFinding
    from guardrag.core.store import VectorStore

#: The one finding a KB's own question overrules: the learned classifier's estimate. A rule
#: that names an attack ("ignore previous instructions") is never overruled.
OVERRULABLE = frozenset({"learned.injection"})


class EmbeddingFailed(Exception):
    """The embedding model raised while screening; the original exception is the cause."""


@dataclass(frozen=True)
class Screened:
    """The question as the pipeline goes on with it (masked in redact mode), its embedding
    (None when the guard refused it unread: empty or too long), and the guard's finding."""

    question: str
    vector: np.ndarray | None
    finding: GuardFinding | None
    redacted: bool = False


def _embed(embedder: Embedder, text: str) -> np.ndarray:
    try:
        return embedder.embed([text])[0]
    except Exception as exc:  # onnxruntime, tokenizer or a remote embedder: all the same here
        raise EmbeddingFailed(exc) from exc


def screen(guard: InputGuard, embedder: Embedder, question: str, max_chars: int) -> Screened:
    """The input guard's verdict on `question`; raises EmbeddingFailed when the model fails."""
    embeddable = bool(question.strip()) and len(question) <= max_chars
    vector = _embed(embedder, question) if embeddable else None
    finding = guard.check(question, max_chars=max_chars, vector=vector)
    if finding is not None or vector is None:
        return Screened(question, vector, finding)
    masked = guard.redact(question) if guard.pii == "redact" else question
    if masked != question:
        return Screened(masked, _embed(embedder, masked), None, redacted=True)
    return Screened(question, vector, None)


def screen_follow_up(
    guard: InputGuard,
    embedder: Embedder,
    message: str,
    previous: str | None,
    standalone: str,
    max_chars: int,
) -> tuple[Screened, bool]:
    """A rewritten follow-up: the customer's message read with the question it leans on (an
    attack split across turns, or dropped by the rewrite, is still seen whole), then the
    standalone question itself. The flag says whether the finding came from the first read."""
    if previous:
        finding = guard.check_follow_up(message, previous, max_chars)
        if finding is not None:
            return Screened(standalone, None, finding), True
    return screen(guard, embedder, standalone, max_chars), False


def own_question(store: VectorStore, kb: str, screened: Screened) -> str | None:
    """The KB entry whose question the message is, word for word (up to case, punctuation and
    spaces), when that settles a learned classifier's alarm; else None.

    A forum post or FAQ question the operator verified and ingest screened is not an attempt
    on the assistant, however its wording scores ("The confession box! ... say what you
    want!"): it is answered with that entry verbatim, and no model reads it. Only a finding in
    `OVERRULABLE`, only an entry that is served (one carrying instructions for the model never
    is), only one entry; an unreadable index keeps the refusal.
    """
    found = screened.finding
    if found is None or found.rule not in OVERRULABLE or screened.vector is None:
        return None
    try:
        hits = store.find_by_field(kb, "question_norm", normalise(screened.question), limit=2)
    except IndexUnavailable:
        return None
    hits, _ = servable(hits)
    return str(hits[0].payload.get("source_id", hits[0].id)) if len(hits) == 1 else None
