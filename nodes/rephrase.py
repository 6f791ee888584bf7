"""rephrase: asks the chat model to say an unsure question again, as one clear English question.

Two stages send a question here, at most once a turn: `classify`, when the question is only
loosely similar to the KB (Malay, slang and terse jargon: the embedding model reads English),
and `rerank`, when the best FAQ entry is neither confident nor clearly absent, or when nothing
relevant was found for a question only loosely related to the KB. The small model
judges relevance no better than chance (it picks by position), but it rewrites well, so the
rewrite is a second probe, never an answer: it is screened by the input guard like any
question, then retrieved, and `rerank` answers verbatim only when both wordings land on the
same entry (from the domain gate: when the rewrite alone is confident). When its rewrite is
unusable or the question itself, the earlier stage's decision stands (an unsure entry then has
no second wording agreeing with it). When the model fails, the domain gate's refusal stands and
an unsure question is refused llm_unavailable: the model it needs is down.

The customer's own words passed the input guard; the rewrite is the model's. A rewrite that
trips a guard rule is therefore never used and never held against the customer as an attack
("ok thank you, bye" came back as "What did you say?", a prompt-extraction phrase): the
question is refused with the earlier stage's own reason (out of domain, or not confidently
found), and the trail names the rule the rewrite tripped, for the auditor.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from guardrag.config import prompts
from guardrag.contract import Decision, RefusalReason, Usage
from guardrag.core.screening import EmbeddingFailed, screen
from guardrag.core.text import normalise
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import (
    QUESTION_MAX_TOKENS,
    NodeRuntime,
    decide,
    embedding_failed,
    gate,
    knobs,
    refuse_with,
    reply_usage,
    screened_update,
)

NODE = "rephrase"
#: Longer replies are an answer or an essay, not a question.
MAX_REPHRASED_CHARS = 200
#: Input-guard findings on embedding similarity alone: when only the model's rewrite trips one,
#: the rewrite is dropped and the first ranking goes on (a rule finding refuses, see above).
SIMILARITY_ONLY = "semantic."
log = logging.getLogger("guardrag.nodes")


def rephrase(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    try:
        rewrite, problem, usage = _rewrite(state["question"], config, runtime)
    except Exception as exc:  # the model failed: the gate's refusal stands, an unsure question
        log.warning("rephrase: model call failed (%s)", type(exc).__name__)  # can't go on
        problem = f"model call failed: {type(exc).__name__}"
        if state["trail"][-1].node == "classify":
            return _stands(state, "classify", problem)
        failed = decide(NODE, "error", problem)
        return refuse_with(RefusalReason.LLM_UNAVAILABLE, failed, rephrase_tried=True)
    return {**_probe(state, config, runtime, rewrite, problem), "usage": usage}


def _probe(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime, rewrite: str, problem: str
) -> dict[str, Any]:
    """The rewrite as a second probe: screened, then (from the domain gate) gated again."""
    asked_by = state["trail"][-1].node  # classify (the domain gate) or rerank (unsure)
    if problem:
        return _stands(state, asked_by, problem)
    screened = _screen(rewrite, config, runtime)
    said = decide(NODE, "pass", "asked again in plain words", rephrased=rewrite, asked_by=asked_by)
    if screened.get("refusal") is not None:  # the rewrite must pass the guards too
        tripped = screened["trail"][-1]
        if tripped.verdict == "error":  # the embedding model failed: a failure, not a finding
            return screened
        if tripped.reason.startswith(SIMILARITY_ONLY):
            # the customer's words passed; the model's merely resemble an attack: not used
            return _stands(state, asked_by, f"the rewrite resembles {tripped.reason}")
        return _refused(state, asked_by, rewrite, tripped)
    vector = screened["query_vector"]
    update: dict[str, Any] = {}
    if asked_by == "classify":
        kb = state["kb"]
        stats = runtime.context.kb_stats.peek(kb)
        assert stats is not None  # classify loaded them
        verdict, kb_best = gate(runtime, knobs(config), kb, rewrite, vector, stats)
        if verdict.domain != "in_domain":
            refused = decide(
                NODE,
                "block",
                f"rephrased, still {verdict.domain}:{verdict.rule}",
                verdict.score,
                verdict.threshold,
                rephrased=rewrite,
                **verdict.detail,
            )
            return _earlier_refusal(asked_by, refused)
        said = said.model_copy(
            update={
                "reason": f"{said.reason}; the rephrased question is in domain",
                "score": round(kb_best, 4),
                "threshold": verdict.threshold,
            }
        )
        update = {"domain": "in_domain", "kb_similarity": kb_best}
    return {
        **update,
        "rephrase_tried": True,
        "rephrased": rewrite,
        "rephrased_vector": vector,
        "trail": [said],
    }


def _screen(rewrite: str, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    """The input guard's update for the rewrite, in moderate_input's name (the guard's stage)."""
    services = runtime.context
    try:
        found = screen(
            services.input_guard, services.embedder, rewrite, knobs(config).max_input_chars
        )
    except EmbeddingFailed as failed:
        return embedding_failed("moderate_input", failed)
    return screened_update("moderate_input", found, rewrite)


def _rewrite(question: str, config: RunnableConfig, runtime: NodeRuntime) -> tuple[str, str, Usage]:
    """The model's rewrite, or ("", why there is none), and the call's tokens; a failing
    call raises."""
    model, spent = runtime.context.chat_model, Usage()
    if model is None:
        return "", "no chat model to rephrase with", spent
    messages = [
        SystemMessage(prompts.REPHRASE_SYSTEM),
        HumanMessage(prompts.REPHRASE_USER.format(question=question)),
    ]
    reply = model.bind(max_tokens=QUESTION_MAX_TOKENS).invoke(messages, config)
    spent = reply_usage(reply, runtime.context.model_name)
    text = reply.content if isinstance(reply.content, str) else ""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    rewrite = lines[0].removeprefix("Question:").strip().strip("\"'“”") if lines else ""
    if not rewrite or len(rewrite) > MAX_REPHRASED_CHARS or prompts.NO_ANSWER in rewrite:
        return "", "no usable rewrite", spent
    if normalise(rewrite) == normalise(question):
        return "", "the model kept the question as it was", spent
    return rewrite, "", spent


def _refused(
    state: PipelineState, asked_by: str, rewrite: str, tripped: Decision
) -> dict[str, Any]:
    """A rewrite that trips a guard rule: refused with the earlier stage's reason, not the
    rule's."""
    decision = decide(
        NODE,
        "block",
        f"the rewrite trips {tripped.reason}; the customer's words passed, so "
        f"{state['trail'][-1].reason} stands",
        tripped.score,
        tripped.threshold,
        rephrased=rewrite,
        rule=tripped.reason,
    )
    return _earlier_refusal(asked_by, decision)


def _earlier_refusal(asked_by: str, decision: Decision) -> dict[str, Any]:
    """Refused with the reason of the stage that asked: the domain gate's out_of_domain, or
    rerank's low_confidence."""
    reason = RefusalReason.OUT_OF_DOMAIN if asked_by == "classify" else RefusalReason.LOW_CONFIDENCE
    return refuse_with(reason, decision, stage=asked_by, rephrase_tried=True)


def _stands(state: PipelineState, asked_by: str, problem: str) -> dict[str, Any]:
    """No second probe: the domain gate's refusal stands, or an unsure question goes on."""
    if asked_by == "classify":
        gate = state["trail"][-1]
        decision = decide(
            NODE, "block", f"{problem}; {gate.reason} stands", gate.score, gate.threshold
        )
        return _earlier_refusal(asked_by, decision)
    return {
        "rephrase_tried": True,
        "trail": [decide(NODE, "miss", f"{problem}; the first ranking stands")],
    }
