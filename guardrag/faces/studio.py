"""The pipeline for LangGraph's own server and Studio: `langgraph.json` names `make_graph`.

LangGraph's server keeps its own threads and refuses a graph compiled with a checkpointer, and
it can only pass JSON, not guardrag's services. So the factory builds one Guardrag from the
GUARDRAG_* settings (once per process) and returns a graph without a checkpointer whose one
node asks it: every run is guarded, recorded in the audit log (source `langgraph`) and
answered with the full result object, whose trail has every stage's decision. Per-run knobs
come from `config["configurable"]`, as in any LangGraph run. `langgraph dev` needs a virtual
environment of its own (see the README): its packages conflict with this project's test tools.
"""

from __future__ import annotations

import threading
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from guardrag.config.run_config import KNOBS
from guardrag.faces.service import Guardrag


class StudioInput(TypedDict, total=False):
    """What a run takes: the question, and the knowledge base (default GUARDRAG_DEFAULT_KB)."""

    question: str
    kb: str


class StudioState(StudioInput, total=False):
    result: dict[str, Any]  # guardrag's result object (answer, citations, refusal, trail, ...)


_bot: Guardrag | None = None
_lock = threading.Lock()


def _guardrag() -> Guardrag:
    global _bot
    with _lock:
        if _bot is None:
            _bot = Guardrag.from_settings(source="langgraph")
        return _bot


def make_graph(config: RunnableConfig | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A checkpointer-free graph over one Guardrag: question (and kb) in, result out."""

    def answer(state: StudioState, config: RunnableConfig) -> dict[str, Any]:
        configurable = config.get("configurable") or {}
        knobs = {k: v for k, v in configurable.items() if k in KNOBS}
        result = _guardrag().ask(state.get("question", ""), state.get("kb"), knobs=knobs)
        return {"result": result.model_dump(mode="json")}

    graph = StateGraph(StudioState, input_schema=StudioInput)
    graph.add_node("guardrag", answer)
    graph.add_edge(START, "guardrag")
    graph.add_edge("guardrag", END)
    return graph.compile(name="guardrag")
