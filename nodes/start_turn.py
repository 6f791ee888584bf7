"""start_turn: begins a turn with a clean working state.

Without a checkpointer every invocation starts empty anyway. In a thread (checkpointer on),
LangGraph hands each turn the previous turn's state: this node clears everything but the
question, the KB and the thread's `history`, so no answer, refusal, citation or trail of the
last turn can leak into this one.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.graph.state import PipelineState, fresh_turn
from guardrag.nodes.common import NodeRuntime

#: The value every per-turn field starts from, derived from the state's own fields.
FRESH_TURN = fresh_turn()


def start_turn(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    return dict(FRESH_TURN)
