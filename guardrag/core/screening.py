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

if TYPE_CHECKING:
    from guardrag.core.embedder import Embedder
    from guardrag.core.guards import InputGuard
    from guardrag.core.guards.finding import GuardFinding


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
