"""Optional LLM-as-judge for `ground` (knob `grounding_judge`), for users with a strong model.

The rules in guardrag.core.grounding.claims keep the last word on what models judge badly: citations to
passages that were not given, numbers, named entities and negation. On every other claim the
judge's verdict replaces the similarity and overlap thresholds: a strong model recognises a
faithful paraphrase the thresholds miss, and an unfaithful one they let through. A judge that
fails or answers something else leaves the rules' verdict in place, and the trail says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from guardrag.config import prompts
from guardrag.core.grounding.claims import summarise
from guardrag.core.grounding.report import ClaimSupport, GroundingReport, Passage

log = logging.getLogger("guardrag.grounding")


def judge_report(
    report: GroundingReport,
    passages: Sequence[Passage],
    model: BaseChatModel,
    config: RunnableConfig | None = None,
) -> GroundingReport:
    """`report` with each judgeable claim's verdict given by `model`."""
    if report.invalid_citations:
        return report
    by_number = {p.number: p for p in passages}
    claims = [_judged(c, by_number, model, config) for c in report.claims]
    return summarise(claims, report.invalid_citations, report.ignored)


def _judged(
    claim: ClaimSupport,
    by_number: dict[int, Passage],
    model: BaseChatModel,
    config: RunnableConfig | None,
) -> ClaimSupport:
    numbers = claim.cited or ((claim.best_passage,) if claim.best_passage else ())
    if claim.hard_failure or claim.facts_only or not numbers:
        return claim
    passage = "\n\n".join(by_number[n].text for n in numbers if n in by_number)
    messages = [
        SystemMessage(prompts.JUDGE_SYSTEM),
        HumanMessage(prompts.JUDGE_USER.format(passage=passage, claim=claim.claim)),
    ]
    try:
        reply = model.invoke(messages, config)
        verdict = str(reply.content).strip().upper()
    except Exception as exc:  # the rules' verdict stands
        log.warning("grounding judge failed (%s); keeping the rules' verdict", exc)
        return replace(claim, reason=f"{claim.reason} (judge failed: {type(exc).__name__})")
    if verdict.startswith("UNSUPPORTED"):
        return replace(claim, supported=False, reason=f"judge: unsupported by {_label(numbers)}")
    if verdict.startswith("SUPPORTED"):
        return replace(claim, supported=True, reason=f"judge: supported by {_label(numbers)}")
    return replace(claim, reason=f"{claim.reason} (judge answered {verdict[:20]!r})")


def _label(numbers: Sequence[int]) -> str:
    return "".join(f"[{n}]" for n in numbers)
