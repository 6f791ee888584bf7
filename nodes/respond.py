"""respond: delivers the answer; the route and citations were set by the node that produced it."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.graph.state import PipelineState, Turn
from guardrag.nodes.common import NodeRuntime, decide


def respond(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    """Delivers the answer; the route and citations were set by the node that produced it."""
    return {
        "history": [Turn(question=state["question"], answer=state.get("answer", ""))],
        "trail": [decide("respond", "pass", state.get("route") or "answered")],
    }
