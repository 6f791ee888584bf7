"""exact_match: answers verbatim when the question is an FAQ question, up to trivial rewording.

Stage 1: normalised string equality (case, Unicode, apostrophes, punctuation, spaces).
Stage 2 (near-exact): equal sets of content words asked the same way, so "How do I top up?" ==
"how to top up", but "Where is the coronavirus from?" != "What is a coronavirus?" (the question
words differ: guardrag.core.text.question_kind). The KB's own name counts as trivial: "How do I
close my account?" == "How do I close my Kinetic Wallet account?" (KBStats.own_names).
Evidence is a keyword-index lookup; no similarity threshold can be fooled here. An entry
carrying instructions for the model is never served (guards.passages.servable).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.guards.ingest.passages import servable
from guardrag.core.store import Hit, IndexUnavailable
from guardrag.core.text import (
    content_words,
    normalise,
    question_key,
    question_kind,
    question_parts,
)
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "exact_match"
log = logging.getLogger("guardrag.nodes")
#: A question needs this many content words of its own before the KB's name is added to them
#: ("How do I close my account?": close, account); one word and a name is a different question.
OWN_WORDS_WITH_NAMES = 2


@dataclass(frozen=True)
class Lookup:
    """One key to look up: the index field, its value, and the KB's own name words added."""

    field: str
    key: str
    names_added: tuple[str, ...] = ()


def exact_match(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    if not knobs(config).exact_match:
        return {"trail": [decide(NODE, "miss", "disabled")]}
    store, kb, question = runtime.context.store, state["kb"], state["question"]
    stats = runtime.context.kb_stats.peek(kb)
    kind = question_kind(question)
    asked_otherwise: list[str] = []  # entries with the question's words, asked another way
    for lookup in lookups(question, stats.own_names if stats else frozenset()):
        try:
            hits = store.find_by_field(kb, lookup.field, lookup.key, limit=2)
        except IndexUnavailable as exc:
            return refuse_with(
                RefusalReason.INDEX_UNAVAILABLE, decide(NODE, "error", "index", error=str(exc))
            )
        hits, poisoned = servable(hits)
        if poisoned:
            log.warning("exact_match: skipped KB entries carrying instructions: %s", poisoned)
        if lookup.field == "question_key":
            alike = [h for h in hits if _asked_alike(kind, h)]
            asked_otherwise += [str(h.payload.get("source_id")) for h in hits if h not in alike]
            hits = alike
        if len(hits) == 1:  # two FAQ entries with one key are ambiguous: let retrieval decide
            return _answer(hits[0], lookup)
    if asked_otherwise:
        why = f"near-exact words, asked another way than '{kind or 'a statement'}'"
        return {"trail": [decide(NODE, "miss", why, asked_otherwise=asked_otherwise)]}
    return {"trail": [decide(NODE, "miss", "no exact or near-exact question")]}


def lookups(question: str, own_names: frozenset[str]) -> list[Lookup]:
    """The keys to try, in order: the normalised question; its content words; its content
    words with the KB's own name words it leaves out ("How do I close my account?" is "How do I
    close my Kinetic Wallet account?"), when it has two or more words of its own.

    A message of several questions has only the first: it has more content than any one entry
    answers, even when its words make one entry's word set ("How do I top up and is there a
    fee for topping up?")."""
    tried = [Lookup("question_norm", normalise(question))]
    if not question_parts(question):
        words = set(content_words(question))
        left_out = sorted(own_names - words) if len(words) >= OWN_WORDS_WITH_NAMES else []
        tried += [
            Lookup("question_key", question_key(question, added), added)
            for n in range(len(left_out) + 1)
            for added in itertools.combinations(left_out, n)
        ]
    return [lookup for lookup in tried if lookup.key]


def _answer(hit: Hit, lookup: Lookup) -> dict[str, Any]:
    """The entry's own answer, verbatim."""
    match = Candidate.of(hit, score=1.0)
    detail: dict[str, Any] = {"names_added": list(lookup.names_added)} if lookup.names_added else {}
    decision = decide(
        NODE, "hit", lookup.field, 1.0, 1.0, source_id=hit.payload.get("source_id"), **detail
    )
    return {
        "answer": str(hit.payload.get("answer") or hit.payload.get("text")),
        "route": "exact_match",
        "passages": [match],
        "citations": [match.citation()],
        "confidence": 1.0,
        "trail": [decision],
    }


def _asked_alike(kind: str, hit: Hit) -> bool:
    """Whether the entry's question asks the way the customer's does (`kind`, its
    question_kind): the same kind, or any when the customer typed keywords only ("freeze
    membership")."""
    return kind in ("keywords", question_kind(str(hit.payload.get("question") or "")))
