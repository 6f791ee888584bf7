"""refuse: writes the polite, reason-specific message; a refusal never carries citations."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.graph.state import PipelineState, Turn
from guardrag.nodes.common import NodeRuntime, decide, refusal_text


def refuse(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    """Writes the polite, reason-specific message; a refusal never carries citations."""
    refusal = state["refusal"]
    assert refusal is not None, "refuse reached without a refusal"
    message = refusal_text(state, runtime, refusal)
    # A blocked message is not remembered: a thread's history feeds the follow-up rewrite.
    remembered = (
        [] if refusal.kind == "blocked" else [Turn(question=state["question"], answer=message)]
    )
    return {
        "history": remembered,
        "refusal": refusal.model_copy(update={"message": message}),
        "answer": message,
        "route": None,
        "citations": [],
        "confidence": 0.0,
        "trail": [
            decide("refuse", "block", refusal.reason.value, stage=refusal.stage, kind=refusal.kind)
        ],
    }
