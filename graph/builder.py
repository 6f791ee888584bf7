"""Wires the nodes into the LangGraph state machine: one builder for the UI, CLI and notebooks."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from opentelemetry import trace

from guardrag.graph.context import Services
from guardrag.graph.edges import ROUTES, after_offer_choices, destinations, route_after
from guardrag.graph.state import InputState, PipelineState
from guardrag.nodes.classify import classify
from guardrag.nodes.common import NodeRuntime
from guardrag.nodes.contextualize import contextualize
from guardrag.nodes.exact_match import exact_match
from guardrag.nodes.generate import generate
from guardrag.nodes.ground import ground
from guardrag.nodes.judge_passages import judge_passages
from guardrag.nodes.moderate_input import moderate_input
from guardrag.nodes.moderate_output import moderate_output
from guardrag.nodes.offer_choices import offer_choices
from guardrag.nodes.quote import quote
from guardrag.nodes.refuse import refuse
from guardrag.nodes.rephrase import rephrase
from guardrag.nodes.rerank import rerank
from guardrag.nodes.respond import respond
from guardrag.nodes.retrieve import retrieve
from guardrag.nodes.start_turn import start_turn

Node = Callable[[PipelineState, RunnableConfig, NodeRuntime], dict[str, Any]]

NODES: dict[str, Node] = {
    "start_turn": start_turn,
    "moderate_input": moderate_input,
    "contextualize": contextualize,
    "classify": classify,
    "exact_match": exact_match,
    "retrieve": retrieve,
    "rerank": rerank,
    "rephrase": rephrase,
    "judge_passages": judge_passages,
    "generate": generate,
    "ground": ground,
    "quote": quote,
    "moderate_output": moderate_output,
    "respond": respond,
    "refuse": refuse,
    "offer_choices": offer_choices,
}


_TRACER = trace.get_tracer("guardrag")


def timed(node: Node) -> Node:
    """Stamps the node's wall time on the Decision it records, inside an OpenTelemetry span.

    The spans cost nothing and go nowhere until an operator configures an OpenTelemetry SDK and
    exporter for the process (e.g. `opentelemetry-instrument`); guardrag itself sends nothing.
    """

    @functools.wraps(node)
    def run(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
        with _TRACER.start_as_current_span(f"guardrag.{node.__name__}") as span:
            start = time.perf_counter()
            update = node(state, config, runtime)
            ms = round((time.perf_counter() - start) * 1000, 3)
            trail = update.get("trail")
            if trail:
                decision = trail[-1].model_copy(update={"ms": ms})
                update["trail"] = [*trail[:-1], decision]
                span.set_attribute("guardrag.verdict", decision.verdict)
                span.set_attribute("guardrag.reason", decision.reason)
        return update

    return run


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The guarded answer pipeline; services arrive per invocation via `context=Services(...)`.

    With a `checkpointer`, invocations that share a `thread_id` form a conversation (their
    recent turns are kept in `history` for `contextualize`).
    """
    graph = StateGraph(PipelineState, context_schema=Services, input_schema=InputState)
    for name, node in NODES.items():
        # langgraph's overloads type (state, config) and (state, runtime) nodes but not both.
        graph.add_node(name, timed(node))  # type: ignore[call-overload]
    graph.add_edge(START, "start_turn")
    graph.add_edge("start_turn", "moderate_input")
    for name in ROUTES:
        graph.add_conditional_edges(name, route_after(name), list[str](destinations(name)))
    graph.add_edge("respond", END)
    graph.add_edge("refuse", END)
    graph.add_conditional_edges("offer_choices", after_offer_choices, ["refuse", END])
    return graph.compile(checkpointer=checkpointer, name="guardrag")
