"""rerank: rescores candidates, drops duplicates, and decides how the question will be answered.

- best score below `min_relevance`: refused no_relevant_docs (nothing in the KB answers it),
  or, for a question only loosely related to the KB, asked again in plain words and decided
  as an unsure entry is (below);
- the best is an FAQ entry scoring above the verbatim threshold (the KB's own, calibrated at
  ingest, unless the `faq_answer_threshold` knob sets one) and leads the runner-up by
  `faq_margin`: answered with that entry verbatim (route semantic_match, no LLM); a runner-up
  that gives the question the same answer (`guardrag.core.twins`) is no rival, the lead is
  over the first entry that answers differently;
- an FAQ entry in between (unsure) that the second-opinion embedder also ranks first, ahead of
  its runner-up by `faq_margin`: answered with that entry verbatim (no LLM), unless the
  question names something the KB never does ("Apple's customer service");
- an FAQ entry in between, with a chat model at hand: the question goes to `rephrase` and comes
  back; it is answered verbatim when both wordings rank that entry first, their average clears
  the threshold and leads by `rephrase_margin`; otherwise the first ranking stands;
- document passages that cannot state what the question asks for (a thing it names that the
  KB never names: "the record-keeping requirements", "the exact wording"; a year none of them
  states): refused no_relevant_docs before any LLM is asked;
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

from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.run_config import RunConfig
from guardrag.contract import RefusalReason
from guardrag.core import verbatim
from guardrag.core.grounding.kind import focus_unnamed, year_unstated
from guardrag.core.kb.stats import point_text
from guardrag.core.rerank import (
    FusedReranker,
    agreement,
    answers_in_kind,
    lexical_coverage,
    semantic_similarity,
)
from guardrag.core.second_opinion import Opinion
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import (
    NodeRuntime,
    can_rephrase,
    decide,
    faq_threshold,
    knobs,
    probe,
    refuse_with,
    verbatim_update,
)
from guardrag.nodes.rerank import ranking
from guardrag.nodes.rerank.parts import by_parts, decide_parts
from guardrag.nodes.rerank.ranking import NODE


@dataclass
class _Deciding:
    """What rerank knows of one question so far: each step reads it, and narrows it when the
    step does not decide (the ranking that stands, the trail detail gathered, what may follow)."""

    state: PipelineState
    run: RunConfig
    runtime: NodeRuntime
    name: str  # the reranker that scored, for the trail
    threshold: float  # the verbatim-answer threshold
    source: str  # where the threshold comes from
    question: str  # the wording the ranking is read against
    ranked: list[Candidate]
    first: list[Candidate]  # the first ranking, back from `rephrase`
    detail: dict[str, Any] = field(default_factory=dict)
    same_top: bool = True  # both wordings rank the same entry first (or there is one wording)
    may_rephrase: bool = False
    several: bool = False  # a several-part question, decided part by part
    bests: dict[str, Candidate] = field(default_factory=dict)  # each part's best entry
    _rivals: tuple[Any, tuple[float, int]] | None = None  # lead_over_rivals, with its inputs

    @property
    def best(self) -> Candidate:
        return self.ranked[0]

    @property
    def top(self) -> list[dict[str, Any]]:
        return ranking.top(self.ranked)

    @property
    def lead(self) -> float:
        """The best entry's lead over its first rival (a twin giving the same answer is none)."""
        return self._lead_over_rivals[0]

    @property
    def twins(self) -> list[str]:
        """The entries ranked right after the best that give the question its answer."""
        return [c.citation().source_id for c in self.ranked[1 : 1 + self._lead_over_rivals[1]]]

    @property
    def _lead_over_rivals(self) -> tuple[float, int]:
        """Computed once per wording and ranking (the steps above narrow both)."""
        key = (self.question, tuple((str(c.id), c.score) for c in self.ranked))
        if self._rivals is None or self._rivals[0] != key:
            self._rivals = (key, verbatim.lead_over_rivals(self.question, self.ranked))
        return self._rivals[1]

    @property
    def rival(self) -> str | None:
        """The source id of the best entry's first rival (twins passed over), if any."""
        rivals = self.ranked[1 + self._lead_over_rivals[1] :]
        return rivals[0].citation().source_id if rivals else None

    @property
    def missed(self) -> str | None:
        """The part of the verbatim rule ("threshold" or "lead", `verbatim.missed_part`) that the
        best FAQ entry of a one-part question misses; None for anything else."""
        best = self.best
        if not best.is_faq or self.several:
            return None
        return verbatim.missed_part(best.score, self.lead, self.threshold, self.run.faq_margin)

    @property
    def unsure(self) -> str:
        """Why the best entry is no confident answer, in words: "kw-cards-008 leads
        kw-fees-limits-001 by 0.002, under faq_margin 0.09" ("" when `missed` is None)."""
        if self.missed is None:
            return ""
        why = verbatim.why_unsure(
            self.best.score, self.lead, self.threshold, self.run.faq_margin, self.rival or "nothing"
        )
        return f"{self.best.citation().source_id} {why}"

    @property
    def held_back_by(self) -> str | None:
        """The rival that alone kept the best entry from a verbatim answer (its score clears the
        threshold, its lead falls short): the eval report counts these pairs, entries that
        overlap."""
        return self.rival if self.missed == "lead" else None

    @property
    def confident(self) -> bool:
        best, margin = self.best, self.run.faq_margin
        return verbatim.answers_verbatim(best.is_faq, best.score, self.lead, self.threshold, margin)


def rerank(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    """The decision, step by step in the order above: each step returns the node's update when
    it decides, else None, and may narrow what the later steps read (`_Deciding`)."""
    d = _ranking(state, knobs(config), runtime)
    if (update := _back_from_rephrase(d)) is not None:
        return update
    if (update := _by_each_part(d)) is not None:
        return update
    if (update := _nothing_relevant(d)) is not None:
        return update
    if (update := _confident_entry(d)) is not None:
        return update
    if (update := _second_opinion_agrees(d)) is not None:
        return update
    if (update := _unsure_entry_asked_again(d)) is not None:
        return update
    evidence = _evidence(d)
    if (update := _asked_unstated(d, evidence)) is not None:
        return update
    if (update := _lacking_evidence(d, evidence)) is not None:
        return update
    if (update := _not_generated(d)) is not None:
        return update
    return _to_generate(d, evidence)


def _ranking(state: PipelineState, run: RunConfig, runtime: NodeRuntime) -> _Deciding:
    """The candidates rescored and without duplicates, and the verbatim threshold."""
    question, _ = probe(state)
    ranked, name = ranking.score(question, state["kb"], state["candidates"], run, runtime)
    ranked = ranking.dedupe(ranked)
    threshold, source = faq_threshold(run, runtime, state["kb"])
    first = state.get("first_ranking") or []
    return _Deciding(state, run, runtime, name, threshold, source, question, ranked, first)


def _back_from_rephrase(d: _Deciding) -> dict[str, Any] | None:
    """Back from `rephrase`: the entry both wordings agree on, verbatim; otherwise the unsure
    first ranking and the customer's own wording stand (a rewrite alone is no second opinion)."""
    state, run, first = d.state, d.run, d.first
    if first and state.get("rephrased"):
        agreed = agreement(
            ranking.scores(first),
            ranking.scores(d.ranked),
            d.threshold,
            run.rephrase_margin,
            run.faq_margin,
        )
        d.detail = {
            "rephrased": state.get("rephrased"),
            "rephrased_top": ranking.top(d.ranked),
            "average": round(agreed.score, 4),
            "lead": round(agreed.lead, 4),
            "margin": run.rephrase_margin,
        }
        entry = next(
            (c for c in first if str(c.payload.get("source_id", c.id)) == agreed.entry), None
        )
        missed = ranking.misses_follow_up(state, entry, run, d.runtime) if entry is not None else {}
        if (
            agreed.agreed
            and entry is not None
            and answers_in_kind(state["question"], entry.payload)
            and not missed
        ):
            why = f"{d.name}: {agreed.why}"
            return _verbatim(
                replace(entry, score=agreed.score), d.ranked, why, d.threshold, d.detail
            )
        if missed:
            d.detail["follow_up"] = missed
        # the customer's own wording decides from here on; the plain one is shown beside it only
        # where both rank the same entry first
        d.same_top = agreed.entry is not None and {
            ranking.scores(first)[0][0],
            ranking.scores(d.ranked)[0][0],
        } == {agreed.entry}
        d.question, d.ranked = state["question"], first
        d.detail["first_ranking_stands"] = agreed.why
    elif first:  # back from `rephrase`, which found no other wording: nothing agrees with the
        # unsure first ranking (kept as it was, the model's "rewrite" is no second opinion)
        d.ranked, d.detail = first, {"first_ranking_stands": "no rephrasing"}
        d.same_top = False
    return None


def _by_each_part(d: _Deciding) -> dict[str, Any] | None:
    """A several-part question: the confident parts' entries verbatim; when no part is
    confident, every part's best entry goes first in the ranking (one answer written from all
    of them, never one entry standing in for all parts) and nobody asks again."""
    state, run = d.state, d.run
    d.may_rephrase = not state.get("rephrase_tried") and can_rephrase(run, d.runtime)
    parts = (
        decide_parts(state, run, d.runtime, d.threshold)
        if state.get("parts") and not d.first
        else []
    )
    d.several = bool(parts)
    asked = "follow-up (its own parts)" if state.get("follow_up") else f"{len(parts)}-part question"
    if not d.several:
        return None
    if (answered := by_parts(parts, d.threshold, asked)) is not None:
        return answered
    d.bests = {str(p.best.id): p.best for p in parts if p.best and p.status != "absent"}
    d.ranked = [*d.bests.values(), *(c for c in d.ranked if str(c.id) not in d.bests)]
    d.detail["parts"] = [{"part": p.question, "status": p.status} for p in parts]
    d.detail["asked"] = asked
    d.may_rephrase = False
    return None


def _nothing_relevant(d: _Deciding) -> dict[str, Any] | None:
    """The best below `min_relevance`: asked again in plain words when the question is only
    loosely related to the KB and may be, else refused as not found."""
    state, run, best = d.state, d.run, d.best
    if best.score >= run.min_relevance:
        return None
    if d.may_rephrase and state.get("kb_similarity", 1.0) < run.domain_confident_similarity:
        # only loosely related, nothing relevant: asked again in plain English, and answered
        # only as far as both wordings agree (a rewrite alone found "What is your phone
        # number?" for "what is your hotline number": the password-reset entry)
        return _ask_again(
            d,
            f"{d.name}: best below min_relevance, loosely related; asking again in plain words",
            best.score,
            run.min_relevance,
            top=d.top,
        )
    return _not_found(
        state,
        run,
        d.ranked,
        f"{d.name}: best below min_relevance",
        best.score,
        run.min_relevance,
        top=d.top,
        **d.detail,
    )


def _confident_entry(d: _Deciding) -> dict[str, Any] | None:
    """A confident FAQ entry of a one-part question, verbatim, unless it answers another kind
    of question or misses a follow-up's own words (noted in the trail detail)."""
    confident = d.confident and not d.several
    missed = ranking.misses_follow_up(d.state, d.best, d.run, d.runtime) if confident else {}
    if confident and not answers_in_kind(d.question, d.best.payload):
        d.detail["definition"] = (
            "a question asking what something is; the entry answers another kind"
        )
    elif missed:
        d.detail["follow_up"] = missed
    elif confident:
        return _verbatim(
            d.best,
            d.ranked,
            f"{d.name}: confident FAQ entry",
            d.threshold,
            {
                "lead": round(d.lead, 4),
                "margin": d.run.faq_margin,
                "threshold_from": d.source,
                "top": d.top,
                **({"twins": d.twins} if d.twins else {}),
            },
        )
    return None


def _second_opinion_agrees(d: _Deciding) -> dict[str, Any] | None:
    """An FAQ entry of a first, one-part question at or above the verbatim threshold but not
    ahead of its rival by `faq_margin`, that the second-opinion embedder ranks first by
    `faq_margin`: verbatim (`verbatim.answers_verbatim`). Below the threshold it is not asked
    (there its answers were wrong more often than right), and the run knob is off by default
    (docs/RESULTS.md, "The second opinion settles a close lead")."""
    state, run, best = d.state, d.run, d.best
    if not (
        best.is_faq
        and best.score >= d.threshold
        and not (d.confident or d.several or d.first or state.get("follow_up"))
        and answers_in_kind(d.question, best.payload)
    ):
        return None
    opinion = ask_second_opinion(d.question, state["kb"], d.ranked, run, d.runtime, d.detail)
    entry = str(best.payload.get("source_id"))
    second_lead = opinion.lead if opinion and opinion.agrees(entry, -1.0) else verbatim.NOT_ASKED
    if not verbatim.answers_verbatim(
        True, best.score, d.lead, d.threshold, run.faq_margin, second_lead
    ):
        return None
    return _verbatim(
        best,
        d.ranked,
        f"{d.name}: unsure FAQ entry, ranked first by the second opinion too",
        d.threshold,
        {"lead": round(d.lead, 4), "threshold_from": d.source, "top": d.top, **d.detail},
    )


def _unsure_entry_asked_again(d: _Deciding) -> dict[str, Any] | None:
    """An unsure FAQ entry, with a chat model at hand: the question goes to `rephrase`."""
    if not (d.best.is_faq and d.may_rephrase):
        return None
    return _ask_again(
        d,
        f"{d.name}: unsure FAQ entry{_because(d)}; asking again in plain words",
        d.best.score,
        d.threshold,
        **_held_back(d),
        lead=round(d.lead, 4),
        margin=d.run.faq_margin,
        threshold_from=d.source,
        top=d.top,
        **d.detail,
    )


def _ask_again(
    d: _Deciding, why: str, score: float, threshold: float, **detail: Any
) -> dict[str, Any]:
    """To `rephrase`, keeping this ranking as the first one to compare with."""
    decision = decide(NODE, "miss", why, score, threshold, **detail)
    return {"candidates": d.ranked, "first_ranking": d.ranked, "trail": [decision]}


@dataclass(frozen=True)
class _Evidence:
    """The passages for the model and how much of the question they bear out."""

    passages: list[Candidate]
    coverage: float  # the share of the question's IDF-weighted words the passages hold
    lacking: bool  # neither semantically close (`strong_semantic`) nor `min_evidence_coverage`
    detail: dict[str, Any]  # for the trail


def _evidence(d: _Deciding) -> _Evidence:
    """The passages within `passage_min_ratio` of the best (and every part's best entry), and
    whether they bear the question out."""
    run, best = d.run, d.best
    passages = ranking.passages(d.ranked, run)
    if d.bests:  # every part's best entry, whatever the score ratio
        extra = [c for c in passages if str(c.id) not in d.bests]
        passages = [*d.bests.values(), *extra][: max(run.max_passages, len(d.bests))]
    # A close match to an FAQ question (the title) is evidence on its own, even when the answer
    # is worded differently; for documents the title vector already includes the text.
    semantic = max(best.dense, semantic_similarity(best))
    evidence = lexical_coverage(
        d.question,
        [point_text(p.payload) for p in passages],
        d.runtime.context.kb_stats.peek(d.state["kb"]),
    )
    detail = {
        "semantic": round(semantic, 4),
        "strong_semantic": run.strong_semantic,
        "top": d.top,
        **d.detail,
    }
    lacking = semantic < run.strong_semantic and evidence < run.min_evidence_coverage
    return _Evidence(passages, evidence, lacking, detail)


def _asked_unstated(d: _Deciding, evidence: _Evidence) -> dict[str, Any] | None:
    """Document passages that cannot state what the question asks for: a thing it names that the
    KB never names ("the record-keeping requirements", "the exact wording": kind.focus_unnamed),
    or a year none of the passages states (kind.year_unstated). Refused as not found before any
    model is asked: sharing the question's other words is not stating it, and a model given
    such passages writes the missing rule or figure itself. FAQ entries belong to their own
    questions and are not read this way."""
    if any(p.is_faq for p in evidence.passages):
        return None
    stats = d.runtime.context.kb_stats.peek(d.state["kb"])
    why = focus_unnamed(d.question, stats.names) if stats else None
    if why is None:
        years = [year_unstated(d.question, point_text(p.payload)) for p in evidence.passages]
        why = years[0] if years and None not in years else None
    if why is None:
        return None
    return _not_found(
        d.state,
        d.run,
        d.ranked,
        f"{d.name}: the passages cannot state what the question asks for ({why})",
        None,
        None,
        **evidence.detail,
    )


def _lacking_evidence(d: _Deciding, evidence: _Evidence) -> dict[str, Any] | None:
    """Passages that do not bear the question out: document passages go to the model's
    judgement when there is a model to judge; otherwise refused as not found before any LLM is
    asked (the KB has no evidence for this question)."""
    run = d.run
    if not evidence.lacking:
        return None
    if _judgeable(d.best, run, d.runtime):
        decision = decide(
            NODE,
            "pass",
            f"{d.name}: document passages lack the question's key terms; the model judges them",
            evidence.coverage,
            run.min_evidence_coverage,
            **evidence.detail,
        )
        return {
            "candidates": d.ranked,
            "passages": evidence.passages,
            "passages_unsure": True,
            "trail": [decision],
        }
    return _not_found(
        d.state,
        run,
        d.ranked,
        f"{d.name}: passages lack the question's key terms{_and_unsure(d)}",
        evidence.coverage,
        run.min_evidence_coverage,
        **evidence.detail,
        **_held_back(d),
    )


def _not_generated(d: _Deciding) -> dict[str, Any] | None:
    """Refused low_confidence when nothing may be generated: the LLM is off, or an unsure
    FAQ question (of one part or several) that `faq_generation` keeps from the model."""
    run, best = d.run, d.best
    if not run.use_llm:
        decision = decide(
            NODE,
            "miss",
            f"{d.name}: no confident FAQ entry{_because(d)} and the LLM is off",
            best.score,
            d.threshold,
            **_held_back(d),
            threshold_from=d.source,
            lead=round(d.lead, 4),
            top=d.top,
            **d.detail,
        )
        return refuse_with(RefusalReason.LOW_CONFIDENCE, decision, candidates=d.ranked)
    if best.is_faq and not _may_generate(run, d.same_top, several=bool(d.state.get("parts"))):
        decision = decide(
            NODE,
            "miss",
            f"{d.name}: unsure FAQ entry{_because(d)}, not generated "
            f"(faq_generation={run.faq_generation})",
            best.score,
            d.threshold,
            **_held_back(d),
            threshold_from=d.source,
            top=d.top,
            **d.detail,
        )
        return refuse_with(RefusalReason.LOW_CONFIDENCE, decision, candidates=d.ranked)
    return None


def _because(d: _Deciding) -> str:
    """ " (why the best entry is unsure)" for a reason of the trail; "" when it is not an unsure
    FAQ entry of a one-part question."""
    why = d.unsure
    return f" ({why})" if why else ""


def _and_unsure(d: _Deciding) -> str:
    """ "; the best FAQ entry is unsure too (why)" for a refusal given for another reason."""
    why = d.unsure
    return f"; the best FAQ entry is unsure too ({why})" if why else ""


def _held_back(d: _Deciding) -> dict[str, Any]:
    """{"rival": source id} for the trail when a rival alone held the best entry back."""
    rival = d.held_back_by
    return {"rival": rival} if rival else {}


def _to_generate(d: _Deciding, evidence: _Evidence) -> dict[str, Any]:
    """The passages go to `generate`."""
    decision = decide(
        NODE,
        "pass",
        f"{d.name}: {len(evidence.passages)} passages to generate",
        evidence.coverage,
        d.run.min_evidence_coverage,
        **evidence.detail,
    )
    # generate shows the plain wording beside the customer's only where both found the same entry
    plain = d.state.get("rephrased", "") if d.same_top else ""
    return {
        "candidates": d.ranked,
        "passages": evidence.passages,
        "rephrased": plain,
        "trail": [decision],
    }


def _not_found(
    state: PipelineState,
    run: RunConfig,
    ranked: list[Candidate],
    rule: str,
    score: float | None,
    threshold: float | None,
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


def _verbatim(
    entry: Candidate, ranked: list[Candidate], why: str, threshold: float, detail: dict[str, Any]
) -> dict[str, Any]:
    """Answer with one FAQ entry's own answer (route semantic_match, no LLM)."""
    decision = decide(NODE, "hit", why, entry.score, threshold, **detail)
    return {**verbatim_update(entry, decision), "candidates": ranked}


def _may_generate(run: RunConfig, same_top: bool, several: bool) -> bool:
    """Whether an unsure FAQ question may go to free-text generation: never, always, or when
    agreed (a question of several parts has no second wording to agree: it may)."""
    if run.faq_generation == "never":
        return False
    return run.faq_generation == "always" or several or same_top


def _judgeable(best: Candidate, run: RunConfig, runtime: NodeRuntime) -> bool:
    """Whether passages without the question's words may go to the model's judgement: document
    passages (lay words rarely match a guideline's), with a model to judge and write."""
    return not best.is_faq and run.use_llm and runtime.context.chat_model is not None
