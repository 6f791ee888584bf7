"""retrieve: hybrid search (dense MiniLM + BM25, fused with RRF in Qdrant) for candidates.

After `rephrase`, the search is for the rephrased question (rerank compares both rankings). A
message asking two or three questions ("When is my bill due and can I set up autopay?") is also
searched part by part, so rerank can answer each part from its own entry.

Entries carrying instructions for the model (guards.passages) are dropped, logged and counted
in the trail: ingest quarantines them, this catches any that reached the index anyway.
Document chunks that are not answers (research recommendations, update information; see
guardrag.core.kb.asides) are set aside unless the question asks about them, and named in the
trail (`set_aside`).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.run_config import RunConfig
from guardrag.contract import RefusalReason
from guardrag.core.guards.ingest.passages import servable
from guardrag.core.kb.asides import OPENING, asked_about
from guardrag.core.store import IndexUnavailable, bm25
from guardrag.core.text import question_parts
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, probe, refuse_with

NODE = "retrieve"
log = logging.getLogger("guardrag.nodes")


def retrieve(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    question, vector = probe(state)
    # a message asking two or three questions: each part is searched too (not after rephrase)
    parts = [] if state.get("rephrase_tried") else question_parts(question)
    try:
        candidates, poisoned = _search(runtime, state["kb"], question, vector, run)
        candidates, set_aside = _answers(question, candidates)
        part_candidates = [
            _answers(part, _search(runtime, state["kb"], part, part_vector.tolist(), run)[0])[0]
            for part, part_vector in zip(
                parts, runtime.context.embedder.embed(parts) if parts else [], strict=True
            )
        ]
    except IndexUnavailable as exc:
        return refuse_with(
            RefusalReason.INDEX_UNAVAILABLE, decide(NODE, "error", "index", error=str(exc))
        )
    mode = "hybrid" if run.use_bm25 else "dense"
    aside: dict[str, Any] = {"set_aside": set_aside} if set_aside else {}
    if not candidates:
        return refuse_with(
            RefusalReason.NO_RELEVANT_DOCS,
            decide(NODE, "miss", f"{mode}: no candidates", dropped=poisoned, **aside),
        )
    best = max(c.dense for c in candidates)
    detail: dict[str, Any] = {"searched": question} if state.get("rephrased") else {}
    detail.update(aside)
    if parts:
        detail["parts"] = parts
    return {
        "candidates": candidates,
        "parts": parts,
        "part_candidates": part_candidates,
        "trail": [
            decide(NODE, "pass", mode, best, None, hits=len(candidates), dropped=poisoned, **detail)
        ],
    }


def _search(
    runtime: NodeRuntime, kb: str, question: str, vector: list[float], run: RunConfig
) -> tuple[list[Candidate], dict[str, str]]:
    """The servable candidates for one question, and the entries dropped as poisoned."""
    sparse = bm25.encode_query(question) if run.use_bm25 else None
    hits, poisoned = servable(runtime.context.store.search(kb, vector, sparse, limit=run.top_k))
    if poisoned:
        log.warning(
            "retrieve: dropped KB entries carrying instructions for the model: %s", poisoned
        )
    return [Candidate.of(h, score=h.fused) for h in hits], poisoned


def _answers(question: str, candidates: list[Candidate]) -> tuple[list[Candidate], dict[str, str]]:
    """The candidates that may answer `question`, and {source id: aside} of the document
    chunks set aside as not answers (research recommendations, update information) because
    the question does not ask about them."""
    kept: list[Candidate] = []
    set_aside: dict[str, str] = {}
    for candidate in candidates:
        aside = candidate.payload.get("aside")
        if isinstance(aside, str) and aside != OPENING and not asked_about(question, aside):
            set_aside[str(candidate.payload.get("source_id", candidate.id))] = aside
        else:
            kept.append(candidate)
    return kept, set_aside
