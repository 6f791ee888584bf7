"""moderate_input: refuses attacks and sensitive data before anything else reads the question.

Decides on the input guard's validators (length, injection, jailbreak, harmful intent, PII,
payment data, credential requests, profanity, then semantic similarity to attack exemplars),
cheapest first; the first finding blocks. Embeds the question once for every later stage.
In `pii="redact"` mode, personal values are masked instead and the masked question goes on.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.state import PipelineState
from nodes.common import NodeRuntime, decide, knobs, refuse_with

NODE = "moderate_input"


def moderate_input(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    services, limit = runtime.context, knobs(config).max_input_chars
    question = state.get("question") or ""
    embeddable = bool(question.strip()) and len(question) <= limit
    vector = services.embedder.embed([question])[0] if embeddable else None
    finding = services.input_guard.check(question, max_chars=limit, vector=vector)
    if finding is not None:
        decision = decide(
            NODE, "block", finding.rule, finding.score, finding.threshold, detail=finding.detail
        )
        return refuse_with(finding.reason, decision)
    assert vector is not None  # the guard refuses empty and over-long input
    masked = (
        services.input_guard.redact(question) if services.input_guard.pii == "redact" else question
    )
    if masked != question:
        return {
            "question": masked,
            "query_vector": services.embedder.embed([masked])[0].tolist(),
            "trail": [decide(NODE, "pass", "personal data redacted", pii_mode="redact")],
        }
    return {"query_vector": vector.tolist(), "trail": [decide(NODE, "pass", "no guard fired")]}
