"""How rerank orders the candidates and reads a ranking: rescored, without duplicates, the
passages a budget allows, and whether an entry holds a follow-up's own words."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from guardrag.config.run_config import RunConfig
from guardrag.core.kb.stats import point_text
from guardrag.core.rerank import FusedReranker, RerankUnavailable, lexical_coverage
from guardrag.core.text import normalise
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime

NODE = "rerank"
_FALLBACK = FusedReranker()


def score(
    question: str, kb: str, candidates: list[Candidate], run: RunConfig, runtime: NodeRuntime
) -> tuple[list[Candidate], str]:
    if not run.rerank:  # fusion order, with the calibrated dense cosine as the score
        return [replace(c, score=c.dense) for c in candidates], "off"
    reranker, stats = runtime.context.reranker, runtime.context.kb_stats.peek(kb)
    try:
        scores = reranker.score(question, candidates, stats)
        name = reranker.name
    except RerankUnavailable as exc:
        scores, name = _FALLBACK.score(question, candidates, stats), f"fused (fallback: {exc})"
    ranked = sorted(
        (replace(c, score=float(s)) for c, s in zip(candidates, scores, strict=True)),
        key=lambda c: c.score,
        reverse=True,
    )
    return ranked, name


def dedupe(candidates: list[Candidate]) -> list[Candidate]:
    seen: set[str] = set()
    unique = []
    for candidate in candidates:
        key = normalise(str(candidate.payload.get("text", "")))
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique


def passages(ranked: list[Candidate], run: RunConfig) -> list[Candidate]:
    """Best-first passages within the score ratio, the passage cap and the token budget."""
    chosen: list[Candidate] = []
    tokens = 0
    for candidate in ranked:
        cost = int(len(str(candidate.payload.get("text", "")).split()) * 1.4) + 20
        if (
            candidate.score < ranked[0].score * run.passage_min_ratio
            or len(chosen) >= run.max_passages
        ):
            break
        if chosen and tokens + cost > run.context_token_budget:
            break
        chosen.append(candidate)
        tokens += cost
    return chosen


def scores(ranked: list[Candidate]) -> list[tuple[str, float]]:
    return [(str(c.payload.get("source_id", c.id)), c.score) for c in ranked]


def misses_follow_up(
    state: PipelineState, entry: Candidate, run: RunConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    """Why `entry` does not answer a follow-up that contextualize could only join to the
    previous question (no model): that question finds the topic, but the entry must hold
    `min_evidence_coverage` of the follow-up's own IDF-weighted words ("what about prepaid?" is
    not answered by the postpaid entry the joined question finds). {} when it may answer."""
    follow_up = state.get("follow_up")
    if not follow_up:
        return {}
    stats = runtime.context.kb_stats.peek(state["kb"])
    covered = lexical_coverage(follow_up, [point_text(entry.payload)], stats)
    if covered >= run.min_evidence_coverage:
        return {}
    return {
        "asked": follow_up,
        "entry": entry.payload.get("source_id"),
        "coverage": round(covered, 4),
        "min_evidence_coverage": run.min_evidence_coverage,
    }


def top(ranked: list[Candidate]) -> list[dict[str, Any]]:
    """The first three of a ranking, for the trail."""
    return [
        {"source_id": c.payload.get("source_id"), "score": round(c.score, 4)} for c in ranked[:3]
    ]
