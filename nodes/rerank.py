"""rerank: rescores candidates, drops duplicates, and decides how the question will be answered.

- best score below `min_relevance`: refused no_relevant_docs (nothing in the KB answers it),
  or, for a question only loosely related to the KB, asked again in plain words and decided
  as an unsure entry is (below);
- the best is an FAQ entry scoring above the verbatim threshold (the KB's own, calibrated at
  ingest, unless the `faq_answer_threshold` knob sets one) and leads the runner-up by
  `faq_margin`: answered with that entry verbatim (route semantic_match, no LLM);
- an FAQ entry in between (unsure) that the second-opinion embedder also ranks first, ahead of
  its runner-up by `faq_margin`: answered with that entry verbatim (no LLM), unless the
  question names something the KB never does ("Apple's customer service");
- an FAQ entry in between, with a chat model at hand: the question goes to `rephrase` and comes
  back; it is answered verbatim when both wordings rank that entry first, their average clears
  the threshold and leads by `rephrase_margin`; otherwise the first ranking stands;
- the passages neither come semantically close (`strong_semantic`) nor contain enough of the
  question's IDF-weighted words (`min_evidence_coverage`): refused no_relevant_docs before any
  LLM is asked (the KB has no evidence for this question);
- otherwise the passages within `passage_min_ratio` of the best go to `generate`
  (or, with the LLM switched off, the question is refused low_confidence).

A message asking two or three questions is first decided part by part: when a part has a
confident FAQ entry, the answer is the confident parts' entries verbatim, one after the other,
and names the parts it does not cover (the result lists them in `uncovered`); when none has,
the model may write one answer from every part's best entry.

A follow-up that `contextualize` could only join to the previous question (no model) is
answered from its own parts, and verbatim only by an entry holding `min_evidence_coverage` of
its own words: the previous question finds the topic, it is not asked again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig

from guardrag.config.messages import UNCOVERED_PART
from guardrag.config.run_config import RunConfig
from guardrag.contract import RefusalReason
from guardrag.core.kb.stats import point_text
from guardrag.core.rerank import (
    FusedReranker,
    RerankUnavailable,
    agreement,
    answers_in_kind,
    lexical_coverage,
    semantic_similarity,
)
from guardrag.core.second_opinion import Opinion
from guardrag.core.text import content_words, normalise
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import (
    NodeRuntime,
    can_rephrase,
    decide,
    faq_threshold,
    knobs,
    probe,
    refuse_with,
)

NODE = "rerank"
_FALLBACK = FusedReranker()


def _score(
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


def _not_found(
    state: PipelineState,
    run: RunConfig,
    ranked: list[Candidate],
    rule: str,
    score: float,
    threshold: float,
    **detail: Any,
) -> dict[str, Any]:
    """Nothing relevant: refused out_of_domain if the question was only loosely related to the
    KB at all (classify's best cosine below domain_confident_similarity), else no_relevant_docs."""
    similarity = state.get("kb_similarity", 1.0)
    off_topic = similarity < run.domain_confident_similarity
    decision = decide(
        NODE,
        "miss",
        rule + ("; loosely related to the KB: out of domain" if off_topic else ""),
        score,
        threshold,
        kb_similarity=round(similarity, 4),
        domain_confident_similarity=run.domain_confident_similarity,
        **detail,
    )
    reason = RefusalReason.OUT_OF_DOMAIN if off_topic else RefusalReason.NO_RELEVANT_DOCS
    return refuse_with(reason, decision, candidates=ranked)


def rerank(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    run = knobs(config)
    question, _ = probe(state)
    ranked, name = _score(question, state["kb"], state["candidates"], run, runtime)
    ranked = _dedupe(ranked)
    threshold, source = faq_threshold(run, runtime, state["kb"])
    first = state.get("first_ranking") or []
    if first and state.get("rephrased"):  # back from `rephrase`: do the two wordings agree?
        agreed = agreement(
            _scores(first), _scores(ranked), threshold, run.rephrase_margin, run.faq_margin
        )
        detail: dict[str, Any] = {
            "rephrased": state.get("rephrased"),
            "rephrased_top": _top(ranked),
            "average": round(agreed.score, 4),
            "lead": round(agreed.lead, 4),
            "margin": run.rephrase_margin,
        }
        entry = next(
            (c for c in first if str(c.payload.get("source_id", c.id)) == agreed.entry), None
        )
        missed = _misses_follow_up(state, entry, run, runtime) if entry is not None else {}
        if (
            agreed.agreed
            and entry is not None
            and answers_in_kind(state["question"], entry.payload)
            and not missed
        ):
            why = f"{name}: {agreed.why}"
            return _verbatim(replace(entry, score=agreed.score), ranked, why, threshold, detail)
        if missed:
            detail["follow_up"] = missed
        # the customer's own wording decides from here on; the plain one is shown beside it only
        # where both rank the same entry first
        same_top = agreed.entry is not None and {
            _scores(first)[0][0],
            _scores(ranked)[0][0],
        } == {agreed.entry}
        question, ranked = state["question"], first
        detail["first_ranking_stands"] = agreed.why
    elif first:  # back from `rephrase`, which found no other wording: nothing agrees with the
        # unsure first ranking (kept as it was, the model's "rewrite" is no second opinion)
        ranked, detail = first, {"first_ranking_stands": "no rephrasing"}
        same_top = False
    else:
        detail, same_top = {}, True
    may_rephrase = not state.get("rephrase_tried") and can_rephrase(run, runtime)
    parts = _parts(state, run, runtime, threshold) if state.get("parts") and not first else []
    several = bool(parts)
    asked = "follow-up (its own parts)" if state.get("follow_up") else f"{len(parts)}-part question"
    if several:
        if (answered := _by_parts(parts, threshold, asked)) is not None:
            return answered
        # no part answered with confidence: one answer written from every part's best entry
        # (and the question's own ranking), never one entry standing in for all parts
        bests = {str(p.best.id): p.best for p in parts if p.best and p.status != "absent"}
        ranked = [*bests.values(), *(c for c in ranked if str(c.id) not in bests)]
        detail["parts"] = [{"part": p.question, "status": p.status} for p in parts]
        detail["asked"] = asked
        may_rephrase = False
    else:
        bests = {}
    best = ranked[0]
    top = _top(ranked)
    if best.score < run.min_relevance:
        if may_rephrase and state.get("kb_similarity", 1.0) < run.domain_confident_similarity:
            # only loosely related, nothing relevant: asked again in plain English, and answered
            # only as far as both wordings agree (a rewrite alone found "What is your phone
            # number?" for "what is your hotline number": the password-reset entry)
            decision = decide(
                NODE,
                "miss",
                f"{name}: best below min_relevance, loosely related; asking again in plain words",
                best.score,
                run.min_relevance,
                top=top,
            )
            return {"candidates": ranked, "first_ranking": ranked, "trail": [decision]}
        return _not_found(
            state,
            run,
            ranked,
            f"{name}: best below min_relevance",
            best.score,
            run.min_relevance,
            top=top,
            **detail,
        )
    lead = best.score - (ranked[1].score if len(ranked) > 1 else 0.0)
    confident = best.is_faq and best.score >= threshold and lead >= run.faq_margin
    missed = _misses_follow_up(state, best, run, runtime) if confident and not several else {}
    if confident and not several and not answers_in_kind(question, best.payload):
        detail["definition"] = "a question asking what something is; the entry answers another kind"
    elif missed:
        detail["follow_up"] = missed
    elif confident and not several:
        return _verbatim(
            best,
            ranked,
            f"{name}: confident FAQ entry",
            threshold,
            {
                "lead": round(lead, 4),
                "margin": run.faq_margin,
                "threshold_from": source,
                "top": top,
            },
        )
    if (
        best.is_faq
        and not (confident or several or first or state.get("follow_up"))
        and answers_in_kind(question, best.payload)
    ):
        opinion = ask_second_opinion(question, state["kb"], ranked, run, runtime, detail)
        if opinion is not None and opinion.agrees(
            str(best.payload.get("source_id")), run.faq_margin
        ):
            return _verbatim(
                best,
                ranked,
                f"{name}: unsure FAQ entry, ranked first by the second opinion too",
                threshold,
                {"lead": round(lead, 4), "threshold_from": source, "top": top, **detail},
            )
    if best.is_faq and may_rephrase:
        decision = decide(
            NODE,
            "miss",
            f"{name}: unsure FAQ entry; asking again in plain words",
            best.score,
            threshold,
            lead=round(lead, 4),
            margin=run.faq_margin,
            threshold_from=source,
            top=top,
            **detail,
        )
        return {"candidates": ranked, "first_ranking": ranked, "trail": [decision]}
    passages = _passages(ranked, run)
    if bests:  # every part's best entry, whatever the score ratio
        extra = [c for c in passages if str(c.id) not in bests]
        passages = [*bests.values(), *extra][: max(run.max_passages, len(bests))]
    # A close match to an FAQ question (the title) is evidence on its own, even when the answer
    # is worded differently; for documents the title vector already includes the text.
    semantic = max(best.dense, semantic_similarity(best))
    evidence = lexical_coverage(
        question,
        [point_text(p.payload) for p in passages],
        runtime.context.kb_stats.peek(state["kb"]),
    )
    evidence_detail = {
        "semantic": round(semantic, 4),
        "strong_semantic": run.strong_semantic,
        "top": top,
        **detail,
    }
    unsure = semantic < run.strong_semantic and evidence < run.min_evidence_coverage
    if unsure and _judgeable(best, run, runtime):
        decision = decide(
            NODE,
            "pass",
            f"{name}: document passages lack the question's key terms; the model judges them",
            evidence,
            run.min_evidence_coverage,
            **evidence_detail,
        )
        return {
            "candidates": ranked,
            "passages": passages,
            "passages_unsure": True,
            "trail": [decision],
        }
    if unsure:
        return _not_found(
            state,
            run,
            ranked,
            f"{name}: passages lack the question's key terms",
            evidence,
            run.min_evidence_coverage,
            **evidence_detail,
        )
    if not run.use_llm:
        decision = decide(
            NODE,
            "miss",
            f"{name}: no confident FAQ entry and the LLM is off",
            best.score,
            threshold,
            threshold_from=source,
            lead=round(lead, 4),
            top=top,
            **detail,
        )
        return refuse_with(RefusalReason.LOW_CONFIDENCE, decision, candidates=ranked)
    if best.is_faq and not state.get("parts") and not _may_generate(run, same_top):
        decision = decide(
            NODE,
            "miss",
            f"{name}: unsure FAQ entry, not generated (faq_generation={run.faq_generation})",
            best.score,
            threshold,
            threshold_from=source,
            top=top,
            **detail,
        )
        return refuse_with(RefusalReason.LOW_CONFIDENCE, decision, candidates=ranked)
    decision = decide(
        NODE,
        "pass",
        f"{name}: {len(passages)} passages to generate",
        evidence,
        run.min_evidence_coverage,
        **evidence_detail,
    )
    # generate shows the plain wording beside the customer's only where both found the same entry
    plain = state.get("rephrased", "") if same_top else ""
    return {"candidates": ranked, "passages": passages, "rephrased": plain, "trail": [decision]}


def ask_second_opinion(
    question: str,
    kb: str,
    ranked: list[Candidate],
    run: RunConfig,
    runtime: NodeRuntime,
    detail: dict[str, Any],
) -> Opinion | None:
    """The second-opinion embedder's ranking of the candidates (core/second_opinion.py), noted
    in `detail` for the trail; None when it is off, not installed, not to be asked (a name the
    KB never uses, or a ranking not made by the fused reranker) or fails. Also replayed by
    `guardrag eval --calibrate`."""
    second = runtime.context.second_opinion
    if not run.second_opinion or second is None or len(ranked) < 2:
        return None
    if not run.rerank or not isinstance(runtime.context.reranker, FusedReranker):
        # its ranking re-applies the fused formula: beside a cross-encoder's (or no) reranking
        # the two scales are not comparable
        detail["second_opinion"] = {"model": second.name, "not_asked": "the reranker is not fused"}
        return None
    stats = runtime.context.kb_stats.peek(kb)
    # embeddings blur names: "Apple's customer service" lands on our own, for both models
    names = stats.unknown_names(question) if stats else None
    if names is None or names:
        why = f"the KB never names {names}" if names else "the KB's statistics are not loaded"
        detail["second_opinion"] = {"model": second.name, "not_asked": why}
        return None
    try:
        opinion = second.rank(question, ranked, stats)
    except Exception as exc:  # it fails open: rerank decides without it, and the trail says why
        detail["second_opinion"] = {"model": second.name, "failed": str(exc)[:200]}
        return None
    detail["second_opinion"] = {
        "model": second.name,
        "top": [{"source_id": key, "score": round(score, 4)} for key, score in opinion.ranking[:3]],
        "lead": round(opinion.lead, 4),
        "margin": run.faq_margin,
    }
    return opinion


def _scores(ranked: list[Candidate]) -> list[tuple[str, float]]:
    return [(str(c.payload.get("source_id", c.id)), c.score) for c in ranked]


def _verbatim(
    entry: Candidate, ranked: list[Candidate], why: str, threshold: float, detail: dict[str, Any]
) -> dict[str, Any]:
    """Answer with one FAQ entry's own answer (route semantic_match, no LLM)."""
    return {
        "candidates": ranked,
        "passages": [entry],
        "answer": str(entry.payload.get("answer") or entry.payload.get("text")),
        "route": "semantic_match",
        "citations": [entry.citation()],
        "confidence": round(entry.score, 4),
        "trail": [decide(NODE, "hit", why, entry.score, threshold, **detail)],
    }


@dataclass(frozen=True)
class _Part:
    """One question of a several-part message, and how well the KB answers it."""

    question: str
    best: Candidate | None
    status: Literal["confident", "unsure", "absent"]


def _parts(
    state: PipelineState, run: RunConfig, runtime: NodeRuntime, threshold: float
) -> list[_Part]:
    """Each part's best entry and whether it answers the part verbatim (the same rule as for a
    whole question), may answer it (unsure), or nothing relevant was found (absent). Of a
    follow-up joined to the previous question, only the follow-up's own parts."""
    found = []
    follow_up = set(content_words(state.get("follow_up") or ""))
    for part, candidates in zip(state["parts"], state["part_candidates"], strict=True):
        if follow_up and not set(content_words(part)) <= follow_up:
            continue  # the previous question joined to a follow-up: context, not asked now
        ranked = (
            _dedupe(_score(part, state["kb"], candidates, run, runtime)[0]) if candidates else []
        )
        best = ranked[0] if ranked else None
        lead = best.score - ranked[1].score if best and len(ranked) > 1 else 1.0
        if best is None or best.score < run.min_relevance:
            found.append(_Part(part, best, "absent"))
        elif best.is_faq and best.score >= threshold and lead >= run.faq_margin:
            found.append(_Part(part, best, "confident"))
        else:
            found.append(_Part(part, best, "unsure"))
    return found


def _by_parts(parts: list[_Part], threshold: float, asked: str) -> dict[str, Any] | None:
    """The parts' confident entries verbatim, one after the other, naming the parts not covered
    (a part is answered with confidence or said to be unanswered, never guessed at); None when
    no part is confident."""
    answered = [p.best for p in parts if p.status == "confident" and p.best]
    distinct = list({str(e.id): e for e in answered}.values())
    if not distinct:
        return None
    uncovered = [p.question for p in parts if p.status != "confident"]
    text = "\n\n".join(str(e.payload.get("answer") or e.payload.get("text")) for e in distinct)
    text += "".join(f"\n\n{UNCOVERED_PART.format(part=q.rstrip('?'))}" for q in uncovered)
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


def _misses_follow_up(
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


def _top(ranked: list[Candidate]) -> list[dict[str, Any]]:
    """The first three of a ranking, for the trail."""
    return [
        {"source_id": c.payload.get("source_id"), "score": round(c.score, 4)} for c in ranked[:3]
    ]


def _may_generate(run: RunConfig, same_top: bool) -> bool:
    """Whether an unsure single-entry FAQ question may go to free-text generation."""
    if run.faq_generation == "always":
        return True
    return run.faq_generation == "agreed" and same_top


def _judgeable(best: Candidate, run: RunConfig, runtime: NodeRuntime) -> bool:
    """Whether passages without the question's words may go to the model's judgement: document
    passages (lay words rarely match a guideline's), with a model to judge and write."""
    return not best.is_faq and run.use_llm and runtime.context.chat_model is not None
