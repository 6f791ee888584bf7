"""The LangGraph state machine: state, services, edges and the builder."""

from graph.builder import build_graph

__all__ = ["build_graph"]
