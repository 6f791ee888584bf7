"""quote: answers with a document's own sentences when the model's draft failed grounding.

`ground` sends here the document passage the draft drew on (among those the model was given:
the judge's choice, when it was asked). The one or two sentences of it that answer the
question best (a list with its lead-in, a table row under its header) are the answer,
verbatim, with the passage's citation (route `quoted`, no model writing), only when they could
stand as an answer on their own (guardrag.core.quote.quote_problem): a sentence, not a run of
flattened table cells; not the document's opening; and holding `min_evidence_coverage` of the
question's IDF-weighted words that the KB uses at all (a lay word no passage holds cannot be
quoted; KBStats.known_coverage), or semantically very close to it (`strong_semantic`).
Anything else is refused `not_grounded`, with the quote's coverage and similarity against
those thresholds in the trail.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.kb.asides import OPENING
from guardrag.core.quote import best_quote, quote_problem
from guardrag.core.text import coverage
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "quote"
log = logging.getLogger("guardrag.nodes")


def quote(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    source = state["quote_from"][0]
    payload = source.payload
    label = str(payload.get("label") or payload.get("source_id") or source.id)
    if payload.get("aside") == OPENING:
        decision = decide(NODE, "block", f"{label} is the document's opening, not an answer")
        return refuse_with(RefusalReason.NOT_GROUNDED, decision)
    question = state["question"]
    heading = str(payload.get("section") or payload.get("title") or "")
    try:
        found = best_quote(
            question, str(payload.get("text") or ""), runtime.context.embedder, heading
        )
    except Exception as exc:  # the embedding model failed: nothing can be chosen
        log.error("quote: embedding model failed (%s: %s)", type(exc).__name__, exc)
        decision = decide(NODE, "error", f"embedder failed: {type(exc).__name__}")
        return refuse_with(RefusalReason.MODEL_UNAVAILABLE, decision)
    if found is None:
        decision = decide(NODE, "block", f"{label} has no sentence to quote")
        return refuse_with(RefusalReason.NOT_GROUNDED, decision)
    stats = runtime.context.kb_stats.peek(state["kb"])
    covered = (
        stats.known_coverage(question, found.text) if stats else coverage(question, found.text)
    )
    problem = quote_problem(found, covered, run.min_evidence_coverage, run.strong_semantic)
    evidence = {
        "similarity": round(found.similarity, 4),
        "strong_semantic": run.strong_semantic,
        "units": list(found.units),
        "quote": found.text[:300],
    }
    if problem is not None:
        decision = decide(
            NODE, "block", f"{label}: {problem}", covered, run.min_evidence_coverage, **evidence
        )
        return refuse_with(RefusalReason.NOT_GROUNDED, decision)
    decision = decide(
        NODE,
        "pass",
        f"quoted {len(found.units)} sentence(s) of {label} verbatim",
        covered,
        run.min_evidence_coverage,
        **evidence,
    )
    return {
        "answer": found.text,
        "route": "quoted",
        "passages": [source],
        "citations": [source.citation()],
        "confidence": round(source.score, 4),
        "trail": [decision],
    }
