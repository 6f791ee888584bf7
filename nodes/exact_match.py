"""exact_match: answers verbatim when the question is an FAQ question, up to trivial rewording.

Stage 1: normalised string equality (case, Unicode, apostrophes, punctuation, spaces).
Stage 2 (near-exact): equal sets of content words asked the same way, so "How do I top up?" ==
"how to top up", but "Where is the coronavirus from?" != "What is a coronavirus?" (the question
words differ: guardrag.core.text.question_kind).
Evidence is a keyword-index lookup; no similarity threshold can be fooled here. An entry
carrying instructions for the model is never served (guards.passages.servable).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.guards.ingest.passages import servable
from guardrag.core.store import Hit, IndexUnavailable
from guardrag.core.text import normalise, question_key, question_kind, question_parts
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "exact_match"
log = logging.getLogger("guardrag.nodes")
STAGES = (("question_norm", normalise), ("question_key", question_key))


def exact_match(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    if not knobs(config).exact_match:
        return {"trail": [decide(NODE, "miss", "disabled")]}
    store, kb, question = runtime.context.store, state["kb"], state["question"]
    # a message of several questions has more content than any one entry answers, even when
    # its words make one entry's word set ("How do I top up and is there a fee for topping up?")
    stages = STAGES[:1] if question_parts(question) else STAGES
    asked_otherwise: list[str] = []  # entries with the question's words, asked another way
    for field_name, key_of in stages:
        key = key_of(question)
        if not key:
            continue
        try:
            hits = store.find_by_field(kb, field_name, key, limit=2)
        except IndexUnavailable as exc:
            return refuse_with(
                RefusalReason.INDEX_UNAVAILABLE, decide(NODE, "error", "index", error=str(exc))
            )
        hits, poisoned = servable(hits)
        if poisoned:
            log.warning("exact_match: skipped KB entries carrying instructions: %s", poisoned)
        if field_name == "question_key":
            asked_otherwise = [
                str(h.payload.get("source_id")) for h in hits if not _asked_alike(question, h)
            ]
            hits = [h for h in hits if _asked_alike(question, h)]
        if len(hits) == 1:  # two FAQ entries with one key are ambiguous: let retrieval decide
            hit = hits[0]
            match = Candidate.of(hit, score=1.0)
            decision = decide(
                NODE, "hit", field_name, 1.0, 1.0, source_id=hit.payload.get("source_id")
            )
            return {
                "answer": str(hit.payload.get("answer") or hit.payload.get("text")),
                "route": "exact_match",
                "passages": [match],
                "citations": [match.citation()],
                "confidence": 1.0,
                "trail": [decision],
            }
    if asked_otherwise:
        why = (
            f"near-exact words, asked another way than '{question_kind(question) or 'a statement'}'"
        )
        return {"trail": [decide(NODE, "miss", why, asked_otherwise=asked_otherwise)]}
    return {"trail": [decide(NODE, "miss", "no exact or near-exact question")]}


def _asked_alike(question: str, hit: Hit) -> bool:
    """Whether the entry's question asks for what `question` asks for: the same question kind,
    or any when the customer typed keywords only ("freeze membership")."""
    kind = question_kind(question)
    return kind in ("keywords", question_kind(str(hit.payload.get("question") or "")))
