"""Helpers every node uses to record its Decision and, when it must, a typed refusal."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from guardrag.config.run_config import RunConfig
from guardrag.contract import REASON_KIND, Decision, Refusal, RefusalReason, Verdict
from guardrag.graph.context import Services

NodeRuntime = Runtime[Services]


def knobs(config: RunnableConfig) -> RunConfig:
    return RunConfig.from_runnable_config(config)


def decide(
    node: str,
    verdict: Verdict,
    reason: str = "",
    score: float | None = None,
    threshold: float | None = None,
    **detail: Any,
) -> Decision:
    return Decision(
        node=node,
        verdict=verdict,
        reason=reason,
        score=None if score is None else round(float(score), 4),
        threshold=None if threshold is None else round(float(threshold), 4),
        detail=detail,
    )


def refuse_with(reason: RefusalReason, decision: Decision, **update: Any) -> dict[str, Any]:
    """The partial update of a node that stops the pipeline: its decision plus a typed refusal.

    The user-facing message is written by the `refuse` node, which knows the KB's title.
    """
    refusal = Refusal(reason=reason, stage=decision.node, kind=REASON_KIND[reason], message="")
    return {"refusal": refusal, "trail": [decision], **update}
