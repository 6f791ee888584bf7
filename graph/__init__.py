"""The LangGraph state machine: state (graph/state.py), services (context.py), edges (edges.py)
and the builder (`from graph.builder import build_graph`).

Nothing is imported here, so a node module can import `graph.state` on its own.
"""
