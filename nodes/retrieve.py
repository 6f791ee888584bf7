"""retrieve: hybrid search (dense MiniLM + BM25, fused with RRF in Qdrant) for candidates.

After `rephrase`, the search is for the rephrased question (rerank compares both rankings).

Entries carrying instructions for the model (guards.passages) are dropped, logged and counted
in the trail: ingest quarantines them, this catches any that reached the index anyway.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.guards.passages import servable
from guardrag.core.store import IndexUnavailable, bm25
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "retrieve"
log = logging.getLogger("guardrag.nodes")


def retrieve(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    question, vector = probe(state)
    sparse = bm25.encode_query(question) if run.use_bm25 else None
    try:
        hits = runtime.context.store.search(state["kb"], vector, sparse, limit=run.top_k)
    except IndexUnavailable as exc:
        return refuse_with(
            RefusalReason.INDEX_UNAVAILABLE, decide(NODE, "error", "index", error=str(exc))
        )
    hits, poisoned = servable(hits)
    if poisoned:
        log.warning(
            "retrieve: dropped KB entries carrying instructions for the model: %s", poisoned
        )
    candidates = [Candidate.of(h, score=h.fused) for h in hits]
    mode = "hybrid" if sparse is not None else "dense"
    if not candidates:
        return refuse_with(
            RefusalReason.NO_RELEVANT_DOCS,
            decide(NODE, "miss", f"{mode}: no candidates", dropped=poisoned),
        )
    best = max(c.dense for c in candidates)
    searched = {"searched": question} if state.get("rephrased") else {}
    return {
        "candidates": candidates,
        "trail": [
            decide(
                NODE, "pass", mode, best, None, hits=len(candidates), dropped=poisoned, **searched
            )
        ],
    }


def probe(state: PipelineState) -> tuple[str, list[float]]:
    """What retrieval and rerank look for: the question, or its rephrasing once there is one."""
    if state.get("rephrased"):
        return state["rephrased"], state["rephrased_vector"]
    return state["question"], state["query_vector"]
