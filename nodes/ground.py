"""ground: refuses a drafted answer unless every claim is supported by the passages it cites.

Evidence (per claim, guardrag.core.grounding.claims): embedding similarity and lexical overlap
with the best source sentence, agreement of numbers and named entities, no negation flip, and
citations only to passages that were actually given; over a document passage, a draft must
state a figure when the question asks one (guardrag.core.grounding.kind) and a "Yes" must
agree with the negation and qualifiers of the passage (guardrag.core.grounding.polarity).
Unsupported uncited remarks without figures or qualifiers ("This keeps your money safe.") are
left out when everything else is grounded (guardrag.core.grounding.drafts.prune).

An unsupported draft is replaced, when `grounding_fallback_to_faq` allows (see _fallback): by
the top FAQ entry's answer verbatim when that entry clearly leads the ranking (route
semantic_match); by a quote of a document passage the model was given (the judge's choice)
when the passage clearly leads or the draft drew on it alone: verdict `hit`, and the `quote`
node decides whether its sentences can stand as the answer. Otherwise refused not_grounded.
With the knob `answer_judge` (off by default; nodes.common.judge_answer), the chat model is also
asked whether the document passages state what the question asks for: a grounded draft over
them is served only when it says the passages it cites do (a draft can be true to its passage
and answer nothing: "the exact wording required is <the passage>"), and an ungrounded one is
refused no_relevant_docs when it says none does.
With the knob `grounding_judge`, the chat model judges each claim instead of the similarity
thresholds (guardrag.core.grounding.judge).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.run_config import RunConfig
from guardrag.contract import Decision, RefusalReason
from guardrag.core import verbatim
from guardrag.core.grounding import (
    GroundingReport,
    Passage,
    check_grounding,
    drawn_on,
)
from guardrag.core.grounding.drafts import prune
from guardrag.core.grounding.judge import judge_report
from guardrag.core.grounding.kind import figure_missing, year_unstated
from guardrag.core.grounding.polarity import yes_conflict
from guardrag.core.grounding.split import renumber
from guardrag.core.kb.stats import point_text
from guardrag.core.rerank import answers_in_kind
from guardrag.core.text import asks_for_definition
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import (
    NodeRuntime,
    decide,
    faq_threshold,
    judge_answer,
    knobs,
    refuse_with,
    verbatim_update,
)

NODE = "ground"
log = logging.getLogger("guardrag.nodes")


def _renumber(answer: str, cited: list[int]) -> str:
    """Citations become [1..k] in the order of the returned citation list."""
    mapping = {old: new for new, old in enumerate(cited, start=1)}
    return renumber(answer, mapping, drop_unknown=True)


def ground(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    passages: list[Candidate] = state["passages"]
    given = _given(passages)
    try:
        draft, pruned, report = _checked(state, given, run, runtime, config)
    except Exception as exc:  # the embedding model failed: nothing can be verified
        return _unverifiable(exc)
    if report.supported:
        report = _polarity(state["question"], draft, report, passages)
    claims = _claims(report)
    if report.supported:
        grounded = _grounded(draft, pruned, report, given, passages, claims)
        return _judged(
            state, grounded, [passages[n - 1] for n in _cited(report, given)], runtime, config
        )
    return _ungrounded(state, report, passages, claims, run, runtime, config)


def _given(passages: list[Candidate]) -> list[Passage]:
    """The passages as the model was given them, numbered from 1."""
    return [
        Passage(
            number=n,
            source_id=str(p.payload.get("source_id", p.id)),
            text=f"{p.payload.get('title', '')}. {p.payload.get('text', '')}",
        )
        for n, p in enumerate(passages, start=1)
    ]


def _checked(
    state: PipelineState,
    given: list[Passage],
    run: RunConfig,
    runtime: NodeRuntime,
    config: RunnableConfig,
) -> tuple[str, tuple[str, ...], GroundingReport]:
    """The draft's claims checked against the passages (by the chat model with
    `grounding_judge`), and the draft with its unsupported uncited remarks left out when the
    rest is grounded: (draft, the remarks left out, report). Raises when the embedder fails."""
    min_similarity = run.grounding_min_similarity
    draft, pruned = state["draft"], tuple[str, ...]()
    embedder = runtime.context.embedder
    judge = runtime.context.chat_model if run.grounding_judge else None
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
    return draft, pruned, report


def _unverifiable(exc: Exception) -> dict[str, Any]:
    """Refused model_unavailable: without the embedding model nothing can be verified."""
    log.error("ground: embedding model failed (%s: %s); answer refused", type(exc).__name__, exc)
    decision = decide(NODE, "error", f"embedder failed: {type(exc).__name__}", error=str(exc)[:300])
    return refuse_with(RefusalReason.MODEL_UNAVAILABLE, decision)


def _claims(report: GroundingReport) -> list[dict[str, Any]]:
    """Each claim's evidence, for the trail."""
    return [
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


def _grounded(
    draft: str,
    pruned: tuple[str, ...],
    report: GroundingReport,
    given: list[Passage],
    passages: list[Candidate],
    claims: list[dict[str, Any]],
) -> dict[str, Any]:
    """The grounded draft, cited by the passages it draws on (route generated)."""
    cited = _cited(report, given)
    reason = report.reason or "all claims supported"
    if pruned:
        reason = f"{reason}; {len(pruned)} unsupported uncited remark(s) left out"
    decision = decide(NODE, "pass", reason, report.score, None, claims=claims, pruned=list(pruned))
    return {
        "answer": _renumber(draft, cited),
        "route": "generated",
        "citations": [passages[n - 1].citation() for n in cited],
        "confidence": round(min(report.score, passages[cited[0] - 1].score), 4),
        "trail": [decision],
    }


def _cited(report: GroundingReport, given: list[Passage]) -> list[int]:
    """The passages (numbered from 1) a grounded draft draws on."""
    return sorted(drawn_on(report, given)) or [1]


def _judged(
    state: PipelineState,
    grounded: dict[str, Any],
    cited: list[Candidate],
    runtime: NodeRuntime,
    config: RunnableConfig,
) -> dict[str, Any]:
    """A grounded draft over document passages, once the chat model says the passages it
    cites state what the question asks for (nodes.common.judge_answer): a draft can be true to
    its passage and still not answer ("the exact wording required is <the passage>"). FAQ
    entries answer their own questions and are not asked about."""
    judged = judge_answer(NODE, state, *_documents(cited), runtime, config)
    if judged is None:
        return grounded
    if judged.get("refusal") is not None:
        return judged
    return {**grounded, "usage": judged["usage"], "trail": [*grounded["trail"], *judged["trail"]]}


def _ungrounded(
    state: PipelineState,
    report: GroundingReport,
    passages: list[Candidate],
    claims: list[dict[str, Any]],
    run: RunConfig,
    runtime: NodeRuntime,
    config: RunnableConfig,
) -> dict[str, Any]:
    """An unsupported draft: replaced by a document passage to quote or the top FAQ entry
    verbatim when `_fallback` finds one, else refused not_grounded."""
    threshold, _ = faq_threshold(run, runtime, state["kb"])
    ranked = state.get("candidates", [])
    fallback = (
        _fallback(state["question"], report, ranked, passages, run, threshold)
        if ranked and answers_in_kind(state["question"], ranked[0].payload)
        else None
    )
    if fallback is not None and not fallback[0].is_faq:
        source, why = fallback
        decision = decide(
            NODE,
            "hit",
            f"draft not grounded ({report.reason}); {why}: its sentences to be quoted",
            source.score,
            threshold,
            claims=claims,
            source=str(source.payload.get("label") or source.payload.get("source_id") or ""),
        )
        return {"quote_from": [source], "trail": [decision]}
    if fallback is not None:
        top, why = fallback
        decision = decide(
            NODE,
            "miss",
            f"draft not grounded ({report.reason}); {why}: answered with the top FAQ entry "
            "verbatim",
            top.score,
            threshold,
            claims=claims,
        )
        return verbatim_update(top, decision)
    decision = decide(
        NODE, "block", report.reason or "unsupported claims", report.score, None, claims=claims
    )
    return _why_ungrounded(state, decision, passages, runtime, config)


def _why_ungrounded(
    state: PipelineState,
    decision: Decision,
    passages: list[Candidate],
    runtime: NodeRuntime,
    config: RunnableConfig,
) -> dict[str, Any]:
    """Refused: `no_relevant_docs` when the chat model says none of the document passages it
    was given states what the question asks for (the documents hold no answer, not only a
    badly written one), else `not_grounded`."""
    refused = refuse_with(RefusalReason.NOT_GROUNDED, decision)
    judged = judge_answer(NODE, state, *_documents(passages), runtime, config)
    if judged is None:
        return refused
    refusal = judged.get("refusal")
    if refusal is not None and refusal.reason == RefusalReason.NO_RELEVANT_DOCS:
        return {**judged, "trail": [decision, *judged["trail"]]}
    usage = {"usage": judged["usage"]} if "usage" in judged else {}
    return {**refused, **usage}


def _documents(passages: list[Candidate]) -> tuple[list[str], list[str]]:
    """The texts and labels of the document passages (not FAQ entries) among `passages`."""
    documents = [p for p in passages if not p.is_faq]
    labels = [str(p.payload.get("label") or p.payload.get("source_id") or p.id) for p in documents]
    return [point_text(p.payload) for p in documents], labels


def _fallback(
    question: str,
    report: GroundingReport,
    ranked: list[Candidate],
    passages: list[Candidate],
    run: RunConfig,
    threshold: float,
) -> tuple[Candidate, str] | None:
    """The KB entry to answer from instead of an ungrounded draft, and why; None refuses.

    An FAQ entry only when it clearly leads the ranking (score and lead as for a verbatim FAQ
    answer): its answer belongs to its own question. A document passage only among those the
    model was given (the judge's choice, when it was asked): the top one when it clearly
    leads, or the one every unsupported claim is closest to. Retrieval and the model then
    agree on the source and only the wording failed (a small model answering "Yes" where the
    guideline says "avoid"); the passage's own sentences may be the grounded answer.
    """
    if not run.grounding_fallback_to_faq or not ranked:
        return None
    top = ranked[0]
    lead, _ = verbatim.lead_over_rivals(question, ranked)
    leads = verbatim.answers_verbatim(True, top.score, lead, threshold, run.faq_margin)
    why = f"it leads its first rival by {lead:.3f} >= faq_margin {run.faq_margin}"
    if top.is_faq:
        return (top, why) if leads else None
    if leads and any(p.id == top.id for p in passages):
        return top, why
    drawn = {c.best_passage for c in report.claims if not c.supported}
    if len(drawn) != 1 or None in drawn:
        return None
    number = next(iter(drawn))
    source = passages[number - 1] if number and 0 < number <= len(passages) else None
    if source is None or source.is_faq or source.score < threshold:
        return None
    return source, "the draft's unsupported claims all draw on it"


def _polarity(
    question: str, draft: str, report: GroundingReport, passages: list[Candidate]
) -> GroundingReport:
    """`report`, made unsupported when the draft answers the question out of kind (a figure or
    a price asked, none stated: guardrag.core.grounding.kind), or the document passage its
    first claim rests on never states the year the question asks about, or the draft's "Yes"
    contradicts that passage (guardrag.core.grounding.polarity; an FAQ answer belongs to its
    own question, so neither is read against it)."""
    first = report.claims[0] if report.claims else None
    number = (first.cited[0] if first and first.cited else None) or (
        first.best_passage if first else None
    )
    if first is None or not number or not 0 < number <= len(passages):
        return report
    source = passages[number - 1]
    conflict = figure_missing(question, draft)
    if conflict is None and not source.is_faq:
        text = point_text(source.payload)
        conflict = year_unstated(question, text) or yes_conflict(question, draft, text)
    if conflict is None:
        return report
    claim = replace(first, supported=False, best_passage=number, reason=conflict)
    return replace(
        report,
        supported=False,
        score=0.0,
        claims=(claim, *report.claims[1:]),
        reason=f"claim not supported ({conflict})",
    )
