"""classify: is the question about this knowledge base, off topic, or small talk?

Evidence: the best cosine of the question to the KB's entries, to their questions or their answers
(a dense probe of the index: a short question about a detail of an answer is as much in domain as a
paraphrase of an entry's question), against its best cosine to generic off-topic and greeting
exemplars, and names of other companies that the KB never mentions. A question refused on similarity
alone goes to `rephrase` first when a chat model is there (Malay and slang read as off topic to
MiniLM).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.store import IndexUnavailable
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, can_rephrase, decide, gate, knobs, refuse_with

NODE = "classify"
#: Refusals on similarity alone, which a rephrased question may overturn (greetings and other
#: companies' names are no matter of wording).
SOFT_RULES = frozenset({"kb_similarity", "closer_to_off_topic"})


def classify(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    services, run = runtime.context, knobs(config)
    kb = state["kb"]
    try:
        info = services.store.kb_info(kb)
        if info is None:
            raise IndexUnavailable(f"knowledge base {kb!r} does not exist; run `guardrag ingest`")
        stats = services.kb_stats.get(services.store, kb, info.snapshot_id)
        verdict, kb_best = gate(runtime, run, kb, state["question"], state["query_vector"], stats)
    except IndexUnavailable as exc:
        return refuse_with(
            RefusalReason.INDEX_UNAVAILABLE, decide(NODE, "error", "index", error=str(exc))
        )
    update: dict[str, Any] = {"domain": verdict.domain, "kb_similarity": kb_best}
    if verdict.domain == "in_domain":
        decision = decide(
            NODE, "pass", verdict.rule, verdict.score, verdict.threshold, **verdict.detail
        )
        return {**update, "trail": [decision]}
    reason = f"{verdict.domain}:{verdict.rule}"
    if verdict.rule in SOFT_RULES and can_rephrase(run, runtime):
        # Only similarity said no: the same question in plain English may say otherwise.
        decision = decide(
            NODE, "miss", f"{reason}; asking again in plain words", verdict.score,
            verdict.threshold, **verdict.detail,
        )  # fmt: skip
        return {**update, "trail": [decision]}
    decision = decide(NODE, "block", reason, verdict.score, verdict.threshold, **verdict.detail)
    return refuse_with(RefusalReason.OUT_OF_DOMAIN, decision, **update)
