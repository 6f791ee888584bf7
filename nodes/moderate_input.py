"""moderate_input: refuses attacks and sensitive data before anything else reads the question.

Decides on the input guard's validators (injection, jailbreak, harmful intent, PII, payment
data, credential requests, profanity, length), cheapest first; the first finding blocks.
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
    question = state.get("question") or ""
    finding = runtime.context.input_guard.check(question, max_chars=knobs(config).max_input_chars)
    if finding is None:
        return {"trail": [decide(NODE, "pass", "no guard fired")]}
    decision = decide(
        NODE, "block", finding.rule, finding.score, finding.threshold, detail=finding.detail
    )
    return refuse_with(finding.reason, decision)
