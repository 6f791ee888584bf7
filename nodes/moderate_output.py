"""moderate_output: the last check before a user sees an answer, whatever route produced it.

Blocks answers that leak the system prompt, carry PII, secrets or URLs absent from the cited
sources, or contain profanity (the output guard's validators), and, as a backstop, answers
that carry instructions for a model (the KB passage scan).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.prompts import LEAKABLE
from guardrag.contract import RefusalReason
from guardrag.core.guards.passages import scan_passage
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, decide, refuse_with

NODE = "moderate_output"


def moderate_output(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    sources = [
        f"{p.payload.get('title', '')}\n{p.payload.get('text', '')}\n{p.payload.get('url') or ''}"
        for p in state.get("passages", [])
    ]
    finding = runtime.context.output_guard.check(
        state["answer"], sources, list(LEAKABLE)
    ) or scan_passage(state["answer"])
    if finding is None:
        return {"trail": [decide(NODE, "pass", "no guard fired")]}
    decision = decide(
        NODE, "block", finding.rule, finding.score, finding.threshold, detail=finding.detail
    )
    return refuse_with(RefusalReason.UNSAFE_OUTPUT, decision, answer="", citations=[])
