"""refuse: writes the polite, reason-specific message; a refusal never carries citations."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.messages import refusal_message
from guardrag.core.store import KBInfo
from guardrag.graph.state import PipelineState, Turn
from guardrag.nodes.common import NodeRuntime, decide


def _documents(info: KBInfo | None) -> list[str] | None:
    """A document KB's document titles (ingest records them), else None: an FAQ KB's refusals
    speak of its help centre."""
    if info is None or info.extra.get("kind") != "documents":
        return None
    return [str(t) for t in info.extra.get("documents", [])] or None


def refuse(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    """Writes the polite, reason-specific message; a refusal never carries citations."""
    refusal = state["refusal"]
    assert refusal is not None, "refuse reached without a refusal"
    info = None
    try:
        info = runtime.context.store.kb_info(state["kb"])
    except Exception:  # the refusal message must not fail because the index did
        info = None
    title = info.description if info and info.description else state.get("kb", "this service")
    message = refusal_message(
        refusal.reason,
        title,
        info.fallback_url if info else None,
        state.get("domain") == "greeting",
        _documents(info),
    )
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
