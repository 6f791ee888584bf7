"""A message asking two or three questions, decided part by part: each part's best entry and
whether it answers the part verbatim, and the confident parts' entries as one answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from guardrag.config.messages import UNCOVERED_PART, UNSURE_PART
from guardrag.config.run_config import RunConfig
from guardrag.core import verbatim
from guardrag.core.text import content_words
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide
from guardrag.nodes.rerank.ranking import NODE, dedupe, score


@dataclass(frozen=True)
class Part:
    """One question of a several-part message, and how well the KB answers it."""

    question: str
    best: Candidate | None
    status: Literal["confident", "unsure", "absent"]


def decide_parts(
    state: PipelineState, run: RunConfig, runtime: NodeRuntime, threshold: float
) -> list[Part]:
    """Each part's best entry and whether it answers the part verbatim (the same rule as for a
    whole question), may answer it (unsure), or nothing relevant was found (absent). Of a
    follow-up joined to the previous question, only the follow-up's own parts."""
    found = []
    follow_up = set(content_words(state.get("follow_up") or ""))
    for part, candidates in zip(state["parts"], state["part_candidates"], strict=True):
        if follow_up and not set(content_words(part)) <= follow_up:
            continue  # the previous question joined to a follow-up: context, not asked now
        ranked = dedupe(score(part, state["kb"], candidates, run, runtime)[0]) if candidates else []
        best = ranked[0] if ranked else None
        lead, _ = verbatim.lead_over_rivals(part, ranked)
        if best is None or best.score < run.min_relevance:
            found.append(Part(part, best, "absent"))
        elif verbatim.answers_verbatim(best.is_faq, best.score, lead, threshold, run.faq_margin):
            found.append(Part(part, best, "confident"))
        else:
            found.append(Part(part, best, "unsure"))
    return found


def by_parts(parts: list[Part], threshold: float, asked: str) -> dict[str, Any] | None:
    """The parts' confident entries verbatim, one after the other, naming the parts not covered
    (a part is answered with confidence or said to be unanswered, never guessed at); None when
    no part is confident."""
    answered = [p.best for p in parts if p.status == "confident" and p.best]
    distinct = list({str(e.id): e for e in answered}.values())
    if not distinct:
        return None
    uncovered = [p.question for p in parts if p.status != "confident"]
    text = "\n\n".join(e.answer for e in distinct)
    text += "".join(f"\n\n{_not_answered(p, threshold)}" for p in parts if p.status != "confident")
    decision = decide(
        NODE,
        "hit",
        f"{asked}: {len(distinct)} answered verbatim"
        + (f", {len(uncovered)} not covered" if uncovered else ""),
        min(e.score for e in distinct),
        threshold,
        parts=[
            {
                "part": p.question,
                "status": p.status,
                "entry": p.best.payload.get("source_id") if p.best else None,
                "score": round(p.best.score, 4) if p.best else None,
            }
            for p in parts
        ],
    )
    return {
        "passages": distinct,
        "answer": text,
        "route": "semantic_match",
        "citations": [e.citation() for e in distinct],
        "uncovered": uncovered,
        "confidence": round(min(e.score for e in distinct), 4),
        "trail": [decision],
    }


def _not_answered(part: Part, threshold: float) -> str:
    """What the answer says of a part it does not answer: the closest entry when it scores
    the verbatim threshold but does not lead (the customer can ask it), else that nothing
    answers it."""
    asked, best = part.question.rstrip("?"), part.best
    title = best.payload.get("title") if best and best.is_faq else None
    if best is not None and title and part.status == "unsure" and best.score >= threshold:
        return UNSURE_PART.format(part=asked, title=title)
    return UNCOVERED_PART.format(part=asked)
