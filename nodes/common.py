"""Helpers every node uses to record its Decision and, when it must, a typed refusal."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from guardrag.config.messages import refusal_message
from guardrag.config.pricing import estimate_cost
from guardrag.config.run_config import DEFAULT_FAQ_ANSWER_THRESHOLD, RunConfig
from guardrag.contract import REASON_KIND, Decision, Refusal, RefusalReason, Usage, Verdict
from guardrag.core.classify import DomainVerdict, domain_gate
from guardrag.core.kb.calibration import Calibration
from guardrag.core.kb.stats import KBStats
from guardrag.core.passage_judge import states_answer
from guardrag.core.screening import EmbeddingFailed, Screened
from guardrag.core.store import KBInfo
from guardrag.graph.context import Services
from guardrag.graph.state import Candidate, PipelineState

if TYPE_CHECKING:
    from guardrag.core.guards.finding import GuardFinding

NodeRuntime = Runtime[Services]
log = logging.getLogger("guardrag.nodes")
#: Completion cap of a model call that rewrites a question (contextualize, rephrase): a question
#: is one line (~50 tokens at most); the cap bounds a model that starts answering instead.
QUESTION_MAX_TOKENS = 64


def knobs(config: RunnableConfig) -> RunConfig:
    return RunConfig.from_runnable_config(config)


def decide(
    node: str,
    verdict: Verdict,
    reason: str = "",
    score: float | None = None,
    threshold: float | None = None,
    **detail: Any,
) -> Decision:
    return Decision(
        node=node,
        verdict=verdict,
        reason=reason,
        score=None if score is None else round(float(score), 4),
        threshold=None if threshold is None else round(float(threshold), 4),
        detail=detail,
    )


def refuse_with(
    reason: RefusalReason, decision: Decision, stage: str | None = None, **update: Any
) -> dict[str, Any]:
    """The partial update of a node that stops the pipeline: its decision plus a typed refusal.

    `stage` names the stage whose rule refused when it is not the deciding node's own (the
    domain gate's refusal confirmed by `rephrase`). The user-facing message is written by the
    `refuse` node, which knows the KB's title.
    """
    stage = stage or decision.node
    refusal = Refusal(reason=reason, stage=stage, kind=REASON_KIND[reason], message="")
    return {"refusal": refusal, "trail": [decision], **update}


def verbatim_update(entry: Candidate, decision: Decision) -> dict[str, Any]:
    """The update answering with one FAQ entry's own answer (route semantic_match, no words of
    a model's): rerank's confident entry, ground's fallback from a draft."""
    return {
        "answer": entry.answer,
        "route": "semantic_match",
        "passages": [entry],
        "citations": [entry.citation()],
        "confidence": round(entry.score, 4),
        "trail": [decision],
    }


def guard_refusal(
    node: str, finding: GuardFinding, reason: RefusalReason | None = None, **detail: Any
) -> dict[str, Any]:
    """The refusal of a guard's finding: its rule, score and threshold in the trail (`detail`
    entries that are empty are left out), typed with `reason` or the finding's own."""
    decision = decide(
        node,
        "block",
        finding.rule,
        finding.score,
        finding.threshold,
        detail=finding.detail,
        **{k: v for k, v in detail.items() if v},
    )
    return refuse_with(reason or finding.reason, decision)


def faq_threshold(run: RunConfig, runtime: NodeRuntime, kb: str) -> tuple[float, str]:
    """The verbatim-answer threshold for `kb` and where it comes from: the knob when a run sets
    it, else the KB's own (calibrated at ingest), else the default."""
    if run.faq_answer_threshold is not None:
        return run.faq_answer_threshold, "knob"
    info = runtime.context.store.kb_info(kb)
    calibration = Calibration.from_extra(info.extra) if info else None
    if calibration is not None:
        return calibration.faq_answer_threshold, "calibrated"
    return DEFAULT_FAQ_ANSWER_THRESHOLD, "default"


def probe(state: PipelineState) -> tuple[str, list[float]]:
    """What retrieval and rerank look for: the question, or its rephrasing once there is one."""
    if state.get("rephrased"):
        return state["rephrased"], state["rephrased_vector"]
    return state["question"], state["query_vector"]


def can_rephrase(run: RunConfig, runtime: NodeRuntime) -> bool:
    """Whether an unsure question may be asked again in the model's words (`rephrase`)."""
    return run.rephrase_unsure and run.use_llm and runtime.context.chat_model is not None


def reply_usage(reply: Any, model: str) -> Usage:
    """Tokens and estimated cost of one chat-model reply (0 where the endpoint reports none)."""
    meta = getattr(reply, "usage_metadata", None) if isinstance(reply, AIMessage) else None
    prompt_tokens = int(meta.get("input_tokens", 0)) if meta else 0
    completion_tokens = int(meta.get("output_tokens", 0)) if meta else 0
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        estimated_cost_usd=estimate_cost(model, prompt_tokens, completion_tokens),
    )


def embedding_failed(node: str, failed: EmbeddingFailed) -> dict[str, Any]:
    """The refusal when the embedding model failed: kind "error", the cause in the trail and
    one log line (the exception's text, never the question: it may carry personal data)."""
    cause = failed.__cause__
    name = type(cause).__name__
    log.error("%s: embedding model failed (%s: %s); question refused", node, name, cause)
    decision = decide(node, "error", f"embedder failed: {name}", error=str(cause)[:300])
    return refuse_with(RefusalReason.MODEL_UNAVAILABLE, decision)


def screened_update(node: str, screened: Screened, asked: str, /, **detail: Any) -> dict[str, Any]:
    """The update of a screening: the guard's refusal, or the question (masked in redact
    mode) and its vector for the stages after."""
    if screened.finding is not None:
        return guard_refusal(node, screened.finding, **detail)
    assert screened.vector is not None  # the guard refuses what it could not embed
    update: dict[str, Any] = {"query_vector": screened.vector.tolist()}
    if screened.redacted:
        update["question"] = screened.question
        update["trail"] = [decide(node, "pass", "personal data redacted", pii_mode="redact")]
    else:
        update["trail"] = [decide(node, "pass", "no guard fired")]
    return update


def gate(
    runtime: NodeRuntime,
    run: RunConfig,
    kb: str,
    question: str,
    vector: Sequence[float],
    stats: KBStats,
) -> tuple[DomainVerdict, float]:
    """The domain gate (core/classify.py) at the run's thresholds: classify asks it about the
    customer's question, rephrase about the model's rewrite."""
    services = runtime.context
    return domain_gate(
        services.store,
        services.domain,
        kb,
        question,
        vector,
        stats.vocabulary,
        min_similarity=run.domain_min_similarity,
        margin=run.domain_margin,
        greeting_similarity=run.greeting_min_similarity,
    )


def _documents(info: KBInfo | None) -> list[str] | None:
    """A document KB's document titles (ingest records them), else None: an FAQ KB's refusals
    speak of its help centre."""
    if info is None or info.extra.get("kind") != "documents":
        return None
    return [str(t) for t in info.extra.get("documents", [])] or None


def refusal_text(state: PipelineState, runtime: NodeRuntime, refusal: Refusal) -> str:
    """The polite, reason-specific message for `refusal`, naming the KB's help centre or its
    documents; it never fails because the index did (the KB's own name is used instead)."""
    info = None
    try:
        info = runtime.context.store.kb_info(state["kb"])
    except Exception:
        info = None
    title = info.description if info and info.description else state.get("kb", "this service")
    return refusal_message(
        refusal.reason,
        title,
        info.fallback_url if info else None,
        state.get("domain") == "greeting",
        _documents(info),
    )


#: Rule name of the model's check that an answer's text states what the question asks for.
ANSWER_JUDGE = "answer_judge"
#: The model's P(YES) an answer's text must reach: its own argmax, nothing tuned.
ANSWER_JUDGE_MIN_YES = 0.5


def judge_answer(
    node: str,
    state: PipelineState,
    texts: Sequence[str],
    labels: Sequence[str],
    runtime: NodeRuntime,
    config: RunnableConfig,
) -> dict[str, Any] | None:
    """The chat model's word on whether `texts` (a quote, or the document passages a drafted
    answer cites) state what the question asks for, or only share its words and topic ("the
    penalties for ...", "the exact font size ..." against a passage on the same subject).

    None when it is not asked: knob `answer_judge` off (the default), no chat model, `use_llm` off,
    or no text. `judge_passages` having chosen the passages does not stand for it: choosing the
    passage closest to the question is not saying that it states the answer. Otherwise a partial
    update: refused `no_relevant_docs` when the model's P(YES) is under ANSWER_JUDGE_MIN_YES (score,
    threshold, its reply and the texts judged in the trail), or its pass decision with the call's
    usage. A failed call refuses `llm_unavailable`: the answer could not be checked.
    """
    model = runtime.context.chat_model
    run = knobs(config)
    if model is None or not run.use_llm or not run.answer_judge or not texts:
        return None
    try:
        verdict = states_answer(state["question"], "\n\n".join(texts), model, config)
    except Exception as exc:  # the endpoint failed between writing and checking
        log.warning("%s: answer judge failed (%s)", node, type(exc).__name__)
        decision = decide(node, "error", f"answer judge failed: {type(exc).__name__}")
        return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision)
    spent = (verdict.prompt_tokens, verdict.completion_tokens)
    cost = estimate_cost(runtime.context.model_name, *spent)
    usage = Usage(prompt_tokens=spent[0], completion_tokens=spent[1], estimated_cost_usd=cost)
    evidence = {"rule": ANSWER_JUDGE, "reply": verdict.reply, "judged": list(labels)}
    judged = ", ".join(labels)
    if verdict.p_yes < ANSWER_JUDGE_MIN_YES:
        decision = decide(
            node,
            "block",
            f"the model judged that {judged} does not state what the question asks for",
            verdict.p_yes,
            ANSWER_JUDGE_MIN_YES,
            **evidence,
        )
        return {**refuse_with(RefusalReason.NO_RELEVANT_DOCS, decision), "usage": usage}
    decision = decide(
        node,
        "pass",
        f"the model judged that {judged} states what the question asks for",
        verdict.p_yes,
        ANSWER_JUDGE_MIN_YES,
        **evidence,
    )
    return {"trail": [decision], "usage": usage}
