"""ground: refuses a drafted answer unless every claim is supported by the passages it cites.

Evidence (per claim, from guardrag.core.quote import best_quote
from guardrag.core.grounding.claims): embedding similarity and lexical overlap with the
best source sentence, agreement of numbers and named entities, no negation flip, and citations
only to passages that were actually given. Unsupported uncited remarks without figures or
qualifiers ("This keeps your money safe.") are left out when everything else is grounded
(guardrag.core.grounding.drafts.prune). An unsupported draft is replaced by the top KB entry verbatim (an
FAQ answer or a document passage) when that entry clearly leads the ranking, or when it is a
document passage the draft itself drew on (see _fallback), else refused not_grounded. With
the knob
`grounding_judge`, the chat model judges each claim instead of the similarity thresholds
(guardrag.core.grounding.judge).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.run_config import RunConfig
from guardrag.contract import RefusalReason
from guardrag.core.grounding import (
    GroundingReport,
    Passage,
    check_grounding,
    drawn_on,
)
from guardrag.core.grounding.drafts import prune
from guardrag.core.grounding.judge import judge_report
from guardrag.core.quote import best_quote
from guardrag.core.rerank import answers_in_kind
from guardrag.core.text import asks_for_definition
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide, faq_threshold, knobs, refuse_with

NODE = "ground"
log = logging.getLogger("guardrag.nodes")
_CITATION = re.compile(r"\[(\d+)\]")


def _renumber(answer: str, cited: list[int]) -> str:
    """Citations become [1..k] in the order of the returned citation list."""
    mapping = {old: new for new, old in enumerate(cited, start=1)}
    return _CITATION.sub(
        lambda m: f"[{mapping[int(m.group(1))]}]" if int(m.group(1)) in mapping else "", answer
    )


def ground(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    passages: list[Candidate] = state["passages"]
    given = [
        Passage(
            number=n,
            source_id=str(p.payload.get("source_id", p.id)),
            text=f"{p.payload.get('title', '')}. {p.payload.get('text', '')}",
        )
        for n, p in enumerate(passages, start=1)
    ]
    min_similarity = run.grounding_min_similarity
    draft, pruned = state["draft"], tuple[str, ...]()
    embedder = runtime.context.embedder
    judge = runtime.context.chat_model if run.grounding_judge else None
    try:
        report = check_grounding(draft, given, embedder, min_similarity=min_similarity)
        if judge is not None:
            report = judge_report(report, given, judge, config)
        elif not report.supported and (
            edit := prune(
                draft,
                given,
                embedder,
                min_similarity,
                answer_first=asks_for_definition(state["question"]),
            )
        ):
            draft, pruned, report = edit  # unsupported uncited remarks left out; rest grounded
    except Exception as exc:  # the embedding model failed: nothing can be verified
        log.error(
            "ground: embedding model failed (%s: %s); answer refused", type(exc).__name__, exc
        )
        decision = decide(
            NODE, "error", f"embedder failed: {type(exc).__name__}", error=str(exc)[:300]
        )
        return refuse_with(RefusalReason.MODEL_UNAVAILABLE, decision)
    claims = [
        {
            "claim": c.claim[:160],
            "supported": c.supported,
            "similarity": round(c.similarity, 3),
            "overlap": round(c.overlap, 3),
            "passage": c.best_passage,
            "reason": c.reason,
        }
        for c in report.claims
    ]
    if report.supported:
        cited = sorted(drawn_on(report, given)) or [1]
        reason = report.reason or "all claims supported"
        if pruned:
            reason = f"{reason}; {len(pruned)} unsupported uncited remark(s) left out"
        decision = decide(
            NODE, "pass", reason, report.score, None, claims=claims, pruned=list(pruned)
        )
        return {
            "answer": _renumber(draft, cited),
            "route": "generated",
            "citations": [passages[n - 1].citation() for n in cited],
            "confidence": round(min(report.score, passages[cited[0] - 1].score), 4),
            "trail": [decision],
        }
    threshold, _ = faq_threshold(run, runtime, state["kb"])
    ranked = state.get("candidates", [])
    fallback = (
        _fallback(report, ranked, passages, run, threshold)
        if ranked and answers_in_kind(state["question"], ranked[0].payload)
        else None
    )
    if fallback is not None:
        top, why = fallback
        kind = "FAQ entry" if top.is_faq else "passage"
        decision = decide(
            NODE,
            "miss",
            f"draft not grounded ({report.reason}); {why}: answered with the top {kind} verbatim",
            top.score,
            threshold,
            claims=claims,
        )
        return {
            "answer": _verbatim(state["question"], top, runtime),
            "route": "semantic_match",
            "passages": [top],
            "citations": [top.citation()],
            "confidence": round(top.score, 4),
            "trail": [decision],
        }
    decision = decide(
        NODE, "block", report.reason or "unsupported claims", report.score, None, claims=claims
    )
    return refuse_with(RefusalReason.NOT_GROUNDED, decision)


def _fallback(
    report: GroundingReport,
    ranked: list[Candidate],
    passages: list[Candidate],
    run: RunConfig,
    threshold: float,
) -> tuple[Candidate, str] | None:
    """The KB entry to answer verbatim instead of an ungrounded draft, and why; None refuses.

    Either the top entry clearly leads the ranking (score and lead as for a verbatim FAQ
    answer), or it is a document passage that the draft itself drew on: every unsupported
    claim is closest to passage [1], the top of the ranking. Retrieval and the model then
    agree on the source and only the wording failed (a small model answering "Yes" where
    the guideline says "avoid"); the passage's own words are the grounded answer. An FAQ
    entry needs the clear lead: its answer belongs to its own question.
    """
    if not run.grounding_fallback_to_faq or not ranked:
        return None
    top = ranked[0]
    if top.score < threshold:
        return None
    lead = top.score - ranked[1].score if len(ranked) > 1 else 1.0
    if lead >= run.faq_margin:
        return top, f"it leads the runner-up by {lead:.3f} >= faq_margin {run.faq_margin}"
    drawn_on_top = {c.best_passage for c in report.claims if not c.supported} == {1}
    if not top.is_faq and drawn_on_top and passages and passages[0].id == top.id:
        return top, "the draft's unsupported claims all draw on it"
    return None


def _verbatim(question: str, top: Candidate, runtime: NodeRuntime) -> str:
    """An FAQ entry's answer whole; of a document passage, only the sentences (a list with its
    lead-in) that answer the question best: a chunk often holds several recommendations, and
    its first ones may answer something else."""
    text = str(top.payload.get("answer") or top.payload.get("text") or "")
    if top.is_faq:
        return text
    heading = str(top.payload.get("section") or top.payload.get("title") or "")
    quote = best_quote(question, text, runtime.context.embedder, heading)
    return quote.text if quote is not None else text
