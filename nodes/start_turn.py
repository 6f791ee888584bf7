"""start_turn: begins a turn with a clean working state.

Without a checkpointer every invocation starts empty anyway. In a thread (checkpointer on),
LangGraph hands each turn the previous turn's state: this node clears everything but the
question, the KB and the thread's `history`, so no answer, refusal, citation or trail of the
last turn can leak into this one.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import Usage
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime

#: The value every per-turn field starts from (`trail: None` starts a fresh trail).
FRESH_TURN: dict[str, Any] = {
    "query_vector": [],
    "domain": None,
    "kb_similarity": 0.0,
    "candidates": [],
    "passages": [],
    "draft": "",
    "answer": "",
    "route": None,
    "citations": [],
    "confidence": 0.0,
    "refusal": None,
    "usage": Usage(),
    "trail": None,
}


def start_turn(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    return dict(FRESH_TURN)
