"""Conditional edges: where the pipeline goes after each node, from that node's own verdict.

A refusal goes to `refuse`; a not-found refusal after retrieval goes first to `offer_choices`,
which offers the FAQ entries the reranker found relevant, or passes on to `refuse` when none.
Otherwise the node's last Decision verdict is looked up in ROUTES; a verdict a node is not
allowed to return is a bug and raises instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from guardrag.core.choices import OFFER_AFTER
from guardrag.graph.state import PipelineState

NodeName = Literal[
    "moderate_input",
    "contextualize",
    "classify",
    "exact_match",
    "retrieve",
    "rerank",
    "rephrase",
    "judge_passages",
    "generate",
    "ground",
    "quote",
    "moderate_output",
    "respond",
    "refuse",
    "offer_choices",
]

ROUTES: dict[str, dict[str, NodeName]] = {
    "moderate_input": {"pass": "contextualize"},
    "contextualize": {"pass": "classify"},
    "classify": {"pass": "exact_match", "miss": "rephrase"},
    "exact_match": {"hit": "moderate_output", "miss": "retrieve"},
    "retrieve": {"pass": "rerank"},
    "rerank": {"hit": "moderate_output", "pass": "judge_passages", "miss": "rephrase"},
    "judge_passages": {"pass": "generate"},
    "rephrase": {"pass": "retrieve", "miss": "rerank"},
    # hit: the model said no to the one document passage it was given; its sentences are tried
    "generate": {"pass": "ground", "hit": "quote"},
    # miss: an FAQ entry answers verbatim instead; hit: a document passage to quote from
    "ground": {"pass": "moderate_output", "miss": "moderate_output", "hit": "quote"},
    "quote": {"pass": "moderate_output"},
    "moderate_output": {"pass": "respond"},
}


#: Nodes after retrieval: their not-found refusals may offer the close entries instead.
OFFER_FROM = frozenset({"rerank", "rephrase", "judge_passages", "generate", "ground", "quote"})


class UnknownRoute(RuntimeError):
    """A node finished in a state its outgoing edge does not know how to route."""


def route_after(node: str) -> Callable[[PipelineState], NodeName]:
    """The edge function leaving `node`."""
    table = ROUTES[node]

    def route(state: PipelineState) -> NodeName:
        refusal = state.get("refusal")
        if refusal is not None:
            offers = node in OFFER_FROM and refusal.reason in OFFER_AFTER
            return "offer_choices" if offers else "refuse"
        trail = state.get("trail") or []
        if not trail or trail[-1].node != node:
            raise UnknownRoute(f"{node} finished without recording a decision")
        verdict = trail[-1].verdict
        if verdict not in table:
            raise UnknownRoute(
                f"{node} returned verdict {verdict!r} with no refusal; allowed: {sorted(table)}"
            )
        return table[verdict]

    route.__name__ = f"after_{node}"
    return route


def after_offer_choices(state: PipelineState) -> Literal["refuse", "__end__"]:
    """Entries offered: the turn ends with them; none relevant enough: a plain refusal."""
    return "__end__" if state.get("choices") else "refuse"


def destinations(node: str) -> list[NodeName]:
    """Every node reachable from `node` in one step (for drawing and validation)."""
    refusals: set[NodeName] = {"refuse", "offer_choices"} if node in OFFER_FROM else {"refuse"}
    return sorted({*ROUTES[node].values(), *refusals})
