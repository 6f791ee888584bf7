"""classify: is the question about this knowledge base, off topic, or small talk?

Evidence: the best cosine of the question to the KB's entries, to their questions or their answers
(a dense probe of the index: a short question about a detail of an answer is as much in domain as a
paraphrase of an entry's question), against its best cosine to generic off-topic and greeting
exemplars, and names of other companies that the KB never mentions. A question refused on similarity
alone goes to `rephrase` first when a chat model is there (Malay and slang read as off topic to
MiniLM).

Before the gate, a typo the KB's vocabulary can mend ("chnage my pasword") is respelt
(`core/spelling.py`), screened again by the input guard and embedded again: every later stage
reads the respelt question, and the trail keeps what was changed.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.kb.stats import KBStats
from guardrag.core.screening import EmbeddingFailed, screen
from guardrag.core.spelling import respell
from guardrag.core.store import IndexUnavailable
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import (
    NodeRuntime,
    can_rephrase,
    decide,
    embedding_failed,
    gate,
    guard_refusal,
    knobs,
    refuse_with,
)

NODE = "classify"
#: The stage a respelt question's screening is recorded under: the input guard's own.
SCREEN = "moderate_input"
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
        respelt = _respelt(state, run.max_input_chars, runtime, stats)
        if respelt.get("refusal") is not None:
            return respelt
        question = respelt.get("question", state["question"])
        vector = respelt.get("query_vector", state["query_vector"])
        verdict, kb_best = gate(runtime, run, kb, question, vector, stats)
    except IndexUnavailable as exc:
        return refuse_with(
            RefusalReason.INDEX_UNAVAILABLE, decide(NODE, "error", "index", error=str(exc))
        )
    update: dict[str, Any] = {**respelt, "domain": verdict.domain, "kb_similarity": kb_best}
    trail = update.pop("trail", [])
    if verdict.domain == "in_domain":
        decision = decide(
            NODE, "pass", verdict.rule, verdict.score, verdict.threshold, **verdict.detail
        )
        return {**update, "trail": [*trail, decision]}
    reason = f"{verdict.domain}:{verdict.rule}"
    if verdict.rule in SOFT_RULES and can_rephrase(run, runtime):
        # Only similarity said no: the same question in plain English may say otherwise.
        decision = decide(
            NODE, "miss", f"{reason}; asking again in plain words", verdict.score,
            verdict.threshold, **verdict.detail,
        )  # fmt: skip
        return {**update, "trail": [*trail, decision]}
    decision = decide(NODE, "block", reason, verdict.score, verdict.threshold, **verdict.detail)
    refusal = refuse_with(RefusalReason.OUT_OF_DOMAIN, decision, **update)
    return {**refusal, "trail": [*trail, *refusal["trail"]]}


def _respelt(
    state: PipelineState, max_chars: int, runtime: NodeRuntime, stats: KBStats
) -> dict[str, Any]:
    """The question with its typos respelt as the KB's words, screened and embedded again (a
    respelling may complete what the guard read as noise); {} when nothing was respelt."""
    asked = state["question"]
    respelt = respell(asked, stats)
    if not respelt.changes:
        return {}
    services = runtime.context
    try:
        screened = screen(services.input_guard, services.embedder, respelt.question, max_chars)
    except EmbeddingFailed as failed:
        return embedding_failed(NODE, failed)
    if screened.finding is not None:
        return guard_refusal(SCREEN, screened.finding, respelt=respelt.changes)
    assert screened.vector is not None  # the guard refuses what it could not embed
    note = decide(NODE, "pass", "typos respelt as the KB's words", respelt=respelt.changes)
    return {
        "question": screened.question,
        "query_vector": screened.vector.tolist(),
        "trail": [note],
    }
