"""moderate_input: refuses attacks and sensitive data before anything else reads the question.

Decides on the input guard's validators (length, injection, jailbreak, harmful intent, PII,
payment data, credential requests, profanity, then semantic similarity to attack exemplars),
cheapest first; the first finding blocks. Embeds the question once for every later stage.
In `pii="redact"` mode, personal values are masked instead and the masked question goes on.
`screen_follow_up` is contextualize's check of a rewritten follow-up: the original message
with the question it leans on (rules), then the standalone question (everything).
When the embedding model fails, the question is refused (kind "error") with the failure in
the trail and one log line, and the next question tries the model again.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from langchain_core.runnables import RunnableConfig

from guardrag.contract import RefusalReason
from guardrag.core.embedder import Embedder
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, decide, guard_refusal, knobs, refuse_with

NODE = "moderate_input"
#: Without its embedding a question can be neither screened semantically nor looked up.
EMBEDDER_DOWN = RefusalReason.MODEL_UNAVAILABLE

log = logging.getLogger("guardrag.nodes")


class _EmbedFailed(Exception):
    """The embedder raised; carries the original exception."""


def _embed(embedder: Embedder, text: str) -> np.ndarray:
    try:
        return embedder.embed([text])[0]
    except Exception as exc:  # onnxruntime, tokenizer or a remote embedder: all the same here
        raise _EmbedFailed(exc) from exc


def moderate_input(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    try:
        return _moderate(state, config, runtime)
    except _EmbedFailed as failed:
        cause = failed.__cause__
        name = type(cause).__name__
        # The exception text, never the question: it may carry personal data.
        log.error("moderate_input: embedding model failed (%s: %s); question refused", name, cause)
        decision = decide(NODE, "error", f"embedder failed: {name}", error=str(cause)[:300])
        return refuse_with(EMBEDDER_DOWN, decision)


def _moderate(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    services, limit = runtime.context, knobs(config).max_input_chars
    question = state.get("question") or ""
    embeddable = bool(question.strip()) and len(question) <= limit
    vector = _embed(services.embedder, question) if embeddable else None
    finding = services.input_guard.check(question, max_chars=limit, vector=vector)
    if finding is not None:
        return guard_refusal(NODE, finding)
    assert vector is not None  # the guard refuses empty and over-long input
    masked = (
        services.input_guard.redact(question) if services.input_guard.pii == "redact" else question
    )
    if masked != question:
        return {
            "question": masked,
            "query_vector": _embed(services.embedder, masked).tolist(),
            "trail": [decide(NODE, "pass", "personal data redacted", pii_mode="redact")],
        }
    return {"query_vector": vector.tolist(), "trail": [decide(NODE, "pass", "no guard fired")]}


def screen_follow_up(
    state: PipelineState, standalone: str, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    """moderate_input's update for `standalone`, after the original follow-up was read with
    the previous question (the rewrite may have dropped the attack's wording)."""
    history = state.get("history") or []
    if history:
        finding = runtime.context.input_guard.check_follow_up(
            state["question"], history[-1]["question"], knobs(config).max_input_chars
        )
        if finding is not None:
            return guard_refusal(NODE, finding, screened="the follow-up with the previous question")
    return moderate_input({**state, "question": standalone}, config, runtime)
