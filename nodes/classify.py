"""classify: is the question about this knowledge base, off topic, or small talk?

Evidence: the best cosine of the question to the KB's entries (a dense probe of the index)
against its best cosine to generic off-topic and greeting exemplars, and names of other
companies that the KB never mentions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.store import IndexUnavailable
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "classify"


def classify(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    services, run = runtime.context, knobs(config)
    kb, question = state["kb"], state["question"]
    vector = np.asarray(state["query_vector"], dtype=np.float32)  # embedded by moderate_input
    try:
        info = services.store.kb_info(kb)
        if info is None:
            raise IndexUnavailable(f"knowledge base {kb!r} does not exist; run `guardrag ingest`")
        probe = services.store.search(kb, vector.tolist(), None, limit=1)
        stats = services.kb_stats.get(services.store, kb, info.snapshot_id)
    except IndexUnavailable as exc:
        return refuse_with(
            RefusalReason.INDEX_UNAVAILABLE, decide(NODE, "error", "index", error=str(exc))
        )
    kb_best = probe[0].dense if probe else 0.0
    verdict = services.domain.classify(
        question,
        np.asarray(vector),
        kb_best,
        stats.vocabulary,
        min_similarity=run.domain_min_similarity,
        margin=run.domain_margin,
        greeting_similarity=run.greeting_min_similarity,
    )
    update: dict[str, Any] = {
        "domain": verdict.domain,
        "kb_similarity": kb_best,
    }
    if verdict.domain == "in_domain":
        decision = decide(
            NODE, "pass", verdict.rule, verdict.score, verdict.threshold, **verdict.detail
        )
        return {**update, "trail": [decision]}
    decision = decide(
        NODE,
        "block",
        f"{verdict.domain}:{verdict.rule}",
        verdict.score,
        verdict.threshold,
        **verdict.detail,
    )
    return refuse_with(RefusalReason.OUT_OF_DOMAIN, decision, **update)
