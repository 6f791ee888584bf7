"""judge_passages: the chat model says which retrieved passages answer the question, when
the question and the passages share too few words for rerank's lexical evidence.

Only document passages come here unsure (rerank sends an FAQ entry without evidence to
refusal or to rephrase as before): a guideline is asked in lay words. The model chooses among
the few passages rerank kept; it writes only from the ones it chose, and a question no passage
answers is refused `no_relevant_docs` before any writing. Every other question passes through
untouched, with no model call.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.pricing import estimate_cost
from guardrag.contract import RefusalReason, Usage
from guardrag.core.kb.stats import point_text
from guardrag.core.passage_judge import judge_passages as choose
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "judge_passages"
log = logging.getLogger("guardrag.nodes")
#: Passages shown to the judge: rerank's best few (a longer prompt costs seconds on a CPU).
JUDGED = 3


def judge_passages(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    if not state.get("passages_unsure"):
        return {
            "trail": [decide(NODE, "pass", "the passages share the question's words; not asked")]
        }
    model = runtime.context.chat_model
    shown = state["passages"][:JUDGED]
    if model is None or not knobs(config).use_llm:
        decision = decide(NODE, "miss", "no chat model to judge the passages with")
        return refuse_with(RefusalReason.NO_RELEVANT_DOCS, decision)
    try:
        verdict = choose(state["question"], [point_text(p.payload) for p in shown], model, config)
    except Exception as exc:  # the model is down: it could not write the answer either
        log.warning("judge_passages: model call failed (%s)", type(exc).__name__)
        decision = decide(
            NODE, "error", f"judge failed: {type(exc).__name__}", error=str(exc)[:300]
        )
        return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision)
    spent = (verdict.prompt_tokens, verdict.completion_tokens)
    cost = estimate_cost(runtime.context.model_name, *spent)
    usage = Usage(prompt_tokens=spent[0], completion_tokens=spent[1], estimated_cost_usd=cost)
    judged = [str(p.payload.get("label") or p.payload.get("source_id") or p.id) for p in shown]
    if not verdict.chosen:
        decision = decide(
            NODE,
            "miss",
            f"the model judged that none of {len(shown)} passages states the answer",
            reply=verdict.reply,
            judged=judged,
        )
        return {**refuse_with(RefusalReason.NO_RELEVANT_DOCS, decision), "usage": usage}
    chosen = [shown[n - 1] for n in verdict.chosen]
    decision = decide(
        NODE,
        "pass",
        f"the model chose passage(s) {', '.join(map(str, verdict.chosen))} of {len(shown)}",
        reply=verdict.reply,
        judged=judged,
    )
    return {"passages": chosen, "usage": usage, "trail": [decision]}
