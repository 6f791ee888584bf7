"""rerank: rescores candidates, drops duplicates, and decides how the question will be answered.

- best score below `min_relevance`: refused no_relevant_docs (nothing in the KB answers it);
- one FAQ entry scores above `faq_answer_threshold` and leads the next FAQ by `faq_margin`:
  answered with that entry verbatim (route semantic_match, no LLM);
- otherwise the passages within `passage_min_ratio` of the best go to `generate`
  (or, with the LLM switched off, the question is refused low_confidence).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig

from config.run_config import RunConfig
from graph.state import Candidate, PipelineState
from guardrag.contract import RefusalReason
from guardrag.rerank import FusedReranker, RerankUnavailable
from guardrag.text import normalise
from nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "rerank"
_FALLBACK = FusedReranker()


def _score(question: str, candidates: list[Candidate], run: RunConfig, runtime: NodeRuntime) -> tuple[list[Candidate], str]:
    if not run.rerank:  # fusion order, with the calibrated dense cosine as the score
        return [replace(c, score=c.dense) for c in candidates], "off"
    reranker = runtime.context.reranker
    try:
        scores = reranker.score(question, candidates)
        name = reranker.name
    except RerankUnavailable as exc:
        scores, name = _FALLBACK.score(question, candidates), f"fused (fallback: {exc})"
    ranked = sorted(
        (replace(c, score=float(s)) for c, s in zip(candidates, scores, strict=True)),
        key=lambda c: c.score,
        reverse=True,
    )
    return ranked, name


def _dedupe(candidates: list[Candidate]) -> list[Candidate]:
    seen: set[str] = set()
    unique = []
    for candidate in candidates:
        key = normalise(str(candidate.payload.get("text", "")))
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique


def _passages(ranked: list[Candidate], run: RunConfig) -> list[Candidate]:
    """Best-first passages within the score ratio, the passage cap and the token budget."""
    chosen: list[Candidate] = []
    tokens = 0
    for candidate in ranked:
        cost = int(len(str(candidate.payload.get("text", "")).split()) * 1.4) + 20
        if candidate.score < ranked[0].score * run.passage_min_ratio or len(chosen) >= run.max_passages:
            break
        if chosen and tokens + cost > run.context_token_budget:
            break
        chosen.append(candidate)
        tokens += cost
    return chosen


def rerank(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    ranked, name = _score(state["question"], state["candidates"], run, runtime)
    ranked = _dedupe(ranked)
    best = ranked[0]
    top = [{"source_id": c.payload.get("source_id"), "score": round(c.score, 4)} for c in ranked[:3]]
    if best.score < run.min_relevance:
        decision = decide(NODE, "miss", f"{name}: best below min_relevance", best.score, run.min_relevance, top=top)
        return refuse_with(RefusalReason.NO_RELEVANT_DOCS, decision, candidates=ranked)
    faqs = [c for c in ranked if c.is_faq]
    if faqs and faqs[0].score >= run.faq_answer_threshold:
        lead = faqs[0].score - (faqs[1].score if len(faqs) > 1 else 0.0)
        if lead >= run.faq_margin:
            decision = decide(
                NODE, "hit", f"{name}: confident FAQ entry", faqs[0].score, run.faq_answer_threshold,
                lead=round(lead, 4), margin=run.faq_margin, top=top,
            )
            return {
                "candidates": ranked,
                "passages": [faqs[0]],
                "answer": str(faqs[0].payload.get("answer") or faqs[0].payload.get("text")),
                "route": "semantic_match",
                "citations": [faqs[0].citation()],
                "confidence": round(faqs[0].score, 4),
                "trail": [decision],
            }
    if not run.use_llm:
        decision = decide(
            NODE, "miss", f"{name}: no confident FAQ entry and the LLM is off",
            faqs[0].score if faqs else best.score, run.faq_answer_threshold, top=top,
        )
        return refuse_with(RefusalReason.LOW_CONFIDENCE, decision, candidates=ranked)
    passages = _passages(ranked, run)
    decision = decide(NODE, "pass", f"{name}: {len(passages)} passages to generate", best.score, run.min_relevance, top=top)
    return {"candidates": ranked, "passages": passages, "trail": [decision]}
