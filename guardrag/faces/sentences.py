"""Verified sentences while the model is still writing: each finished sentence of the draft is
shown once it passes, on its own, the checks the whole answer will pass later.

A sentence is released when the next one has begun (so a trailing citation stays with it),
and only if it carries no "not in the sources" marker, no echo, leak or unknown citation
(`check_draft`), is supported by the passages (`check_grounding`, the ground node's evidence)
and passes the output guard and the passage scan (`moderate_output`'s checks). The first
sentence that fails stops the release: what follows waits for the final result, so the
released text is always a verified prefix of the draft. A second model call (the generate
node's retry) stops it too. The final result stays authoritative: `ground` may still renumber
citations, leave a remark out, or refuse the draft as a whole, and the faces then show that.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from guardrag.config.prompts import LEAKABLE, NO_ANSWER
from guardrag.config.run_config import RunConfig
from guardrag.core.embedder import Embedder
from guardrag.core.grounding import Passage, check_grounding, split_sentences
from guardrag.core.grounding.drafts import check_draft
from guardrag.core.guards.ingest.passages import scan_passage
from guardrag.graph.context import Services
from guardrag.nodes.generate import passage_text

log = logging.getLogger("guardrag.faces")

#: The node whose model text is the answer's draft.
DRAFTING_NODE = "generate"


class Sentence(BaseModel):
    """A sentence of the draft that passed the grounding and output checks on its own."""

    index: int
    text: str


_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
#: Said after sentences were shown when the final reply does not continue them (the whole
#: answer failed a later check, or was refused): what was shown no longer stands.
WITHDRAWN_NOTE = (
    "The text above is withdrawn: the whole answer did not pass the final checks. "
    "The checked reply:"
)


def continuation(shown: str, final: str) -> tuple[str, bool]:
    """What to send after `shown` so the reader ends with `final`: the rest of `final` when
    it begins with `shown` (whitespace and citation markers aside: `ground` may add or
    renumber them), else `final` after WITHDRAWN_NOTE. The flag says whether what was shown
    is withdrawn."""
    if not shown.strip():
        return final, False
    bare = _CITATION.sub("", shown)
    at = 0
    for char in bare:
        if char.isspace():
            continue
        at = _skip(final, at)
        if at >= len(final) or final[at] != char:
            return f"\n\n*{WITHDRAWN_NOTE}*\n\n{final}", True
        at += 1
    return final[at:], False


def _skip(text: str, at: int) -> int:
    """The position of the next character of `text` from `at` that is neither whitespace nor
    part of a citation marker."""
    while at < len(text):
        marker = _CITATION.match(text, at)
        if marker:
            at = marker.end()
        elif text[at].isspace():
            at += 1
        else:
            break
    return at


def _sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in split_sentences(line) if s.strip()]


class _Remembering:
    """An embedder that embeds each text once: the passages' sentences are the same for every
    sentence of the draft. Checking a new sentence over 5 FAQ passages: p50 431 ms embedding
    them again, 44 ms with them remembered (0.10x; 15 sentences, load average 22 on 2 cores,
    `python scripts/bench_sentence_gate.py`)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.dim = embedder.dim
        self._known: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._known]
        if new:
            self._known.update(zip(new, self.embedder.embed(new), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._known[t] for t in texts])


class SentenceGate:
    """Hears the chat model's text (`feed`) and the pipeline's updates (`step`); calls
    `on_sentence` with each draft sentence that passes its checks, in order."""

    def __init__(
        self,
        services: Services,
        question: str,
        on_sentence: Callable[[Sentence], None],
        knobs: dict[str, Any] | None = None,
    ) -> None:
        self.services = services
        self.embedder = _Remembering(services.embedder)
        self.question = question
        self.on_sentence = on_sentence
        self.min_similarity = RunConfig.checked(knobs).grounding_min_similarity
        self.passages: list[Any] = []
        self.draft = ""
        self.released: list[Sentence] = []
        self._call: str | None = None
        self._checked = 0
        self._stopped = False

    def step(self, node: str, update: dict[str, Any]) -> None:
        """Keeps what the draft is judged against: the question as the pipeline rewrote it,
        and the passages the model is given."""
        if isinstance(update.get("question"), str):
            self.question = update["question"]
        if update.get("passages"):
            self.passages = list(update["passages"])
        if node == DRAFTING_NODE:
            self._stopped = True  # the draft is done: the final result carries the rest

    def feed(self, node: str, call_id: str, text: str) -> None:
        """One piece of model text; releases the sentences it completes."""
        if node != DRAFTING_NODE or self._stopped:
            return
        if self._call is not None and call_id != self._call:
            self._stopped = True  # a retry: its draft is judged whole, at the end
            return
        self._call = call_id
        self.draft += text
        done = _sentences(self.draft)[:-1]  # the last one may still be growing
        while not self._stopped and self._checked < len(done):
            sentence = done[self._checked]
            self._checked += 1
            if not self._verified(sentence):
                self._stopped = True
                break
            released = Sentence(index=len(self.released), text=sentence)
            self.released.append(released)
            self.on_sentence(released)

    def _verified(self, sentence: str) -> bool:
        if NO_ANSWER in self.draft or not self.passages:
            return False
        texts = [passage_text(p) for p in self.passages]
        try:
            draft = check_draft(sentence, texts, self.question, LEAKABLE)
            if draft.problems or draft.removed:
                return False
            report = check_grounding(
                sentence, self._given(), self.embedder, min_similarity=self.min_similarity
            )
            if not report.supported:
                return False
            finding = self.services.output_guard.check(sentence, self._sources(), list(LEAKABLE))
            return finding is None and scan_passage(sentence) is None
        except Exception:  # a check that cannot run verifies nothing; the final result decides
            log.exception("checking a draft sentence failed")
            return False

    def _given(self) -> Sequence[Passage]:
        """The passages as `ground` numbers them (built the same way there)."""
        return [
            Passage(
                number=n,
                source_id=str(p.payload.get("source_id", p.id)),
                text=f"{p.payload.get('title', '')}. {p.payload.get('text', '')}",
            )
            for n, p in enumerate(self.passages, start=1)
        ]

    def _sources(self) -> list[str]:
        """The passages as `moderate_output` reads them, URLs included (the same there)."""
        return [
            f"{p.payload.get('title', '')}\n{p.payload.get('text', '')}\n"
            f"{p.payload.get('url') or ''}"
            for p in self.passages
        ]
