"""quote: answers with a document's own sentences when the model's draft failed grounding, or
the model said the one document passage it was given does not answer.

`ground` sends here the document passage the draft drew on (among those the model was given:
the judge's choice, when it was asked); `generate` the single passage the model said no to.
The one or two sentences of it that answer the question best (a list with its lead-in, a table
row under its header) are the answer, verbatim, with the passage's citation (route `quoted`,
no model writing), only when they could stand as an answer on their own
(guardrag.core.quote.quote_problem): a sentence, not a run of flattened table cells; not the
document's opening; and holding `min_evidence_coverage` of the question's IDF-weighted words
that the KB uses at all (a lay word no passage holds cannot be quoted;
KBStats.known_coverage), or semantically very close to it (`strong_semantic`).
After the model's "no", closeness in meaning is not enough: the quote must hold the question's
key words, counting those the KB never uses (a lay word the document does not share cannot
overrule the model). Anything else is refused `not_grounded` (after a draft) or
`no_relevant_docs` (after the model's "no"), with the quote's coverage and similarity against
those thresholds in the trail. With the knob `answer_judge` (off by default), a quote that can
stand is then read by the chat model (nodes.common.judge_answer): sharing the question's words
is not stating what it asks for ("the penalties for ..." against the rule the penalties are
for), so a quote the model says does not state the answer is refused `no_relevant_docs` (rule
`answer_judge`).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.grounding.kind import year_unstated
from guardrag.core.kb.asides import OPENING
from guardrag.core.quote import best_quote, quote_problem
from guardrag.core.text import coverage
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, decide, judge_answer, knobs, refuse_with

NODE = "quote"
log = logging.getLogger("guardrag.nodes")


def quote(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    # no draft: the model said the passage does not answer; only the question's own key words
    # in the quote can overrule it
    drafted = bool(state.get("draft"))
    refusal = RefusalReason.NOT_GROUNDED if drafted else RefusalReason.NO_RELEVANT_DOCS
    strong_semantic = run.strong_semantic if drafted else None
    source = state["quote_from"][0]
    payload = source.payload
    label = str(payload.get("label") or payload.get("source_id") or source.id)
    if payload.get("aside") == OPENING:
        decision = decide(NODE, "block", f"{label} is the document's opening, not an answer")
        return refuse_with(refusal, decision)
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
        return refuse_with(refusal, decision)
    stats = runtime.context.kb_stats.peek(state["kb"])
    if stats is None:
        covered = coverage(question, found.text)
    elif drafted:
        covered = stats.known_coverage(question, found.text)
    else:  # after the model's "no", a word no passage holds counts against the quote too
        covered = stats.idf_coverage(question, found.text)
    problem = quote_problem(found, covered, run.min_evidence_coverage, strong_semantic)
    problem = problem or year_unstated(question, f"{heading} {payload.get('text') or ''}")
    evidence = {
        "similarity": round(found.similarity, 4),
        "strong_semantic": strong_semantic,
        "units": list(found.units),
        "quote": found.text[:300],
    }
    if problem is not None:
        decision = decide(
            NODE, "block", f"{label}: {problem}", covered, run.min_evidence_coverage, **evidence
        )
        return refuse_with(refusal, decision)
    judged = judge_answer(NODE, state, [found.text], [label], runtime, config) or {}
    if judged.get("refusal") is not None:
        return judged
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
        **({"usage": judged["usage"]} if "usage" in judged else {}),
        "trail": [decision, *judged.get("trail", [])],
    }
