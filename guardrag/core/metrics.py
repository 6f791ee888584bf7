"""Prometheus metrics for every answer and refusal: outcome and reason, per-node latency, tokens.

Recorded by `Guardrag.ask` (so the CLI, batch, UI and API all count) into one process-wide
registry that the HTTP API exposes at /metrics. Nothing is pushed anywhere.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from guardrag.contract import Result

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter(
    "guardrag_requests",
    "Questions answered or refused, by outcome, route and refusal reason.",
    ["outcome", "route", "reason", "kind"],
    registry=REGISTRY,
)
NODE_SECONDS = Histogram(
    "guardrag_node_seconds",
    "Wall time of each pipeline node.",
    ["node"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "guardrag_request_seconds",
    "End-to-end latency of a question.",
    ["outcome"],
    buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32),
    registry=REGISTRY,
)
TOKENS = Counter("guardrag_llm_tokens", "LLM tokens used, by kind.", ["kind"], registry=REGISTRY)
COST = Counter("guardrag_llm_cost_usd", "Estimated LLM cost in US dollars.", registry=REGISTRY)
AUDIT = Gauge(
    "guardrag_audit_records",
    "Audit records by fate (written, spooled, flushed, held in memory).",
    ["fate"],
    registry=REGISTRY,
)


def observe(result: Result) -> None:
    """Count one result; never raises into a request."""
    refusal = result.refusal
    REQUESTS.labels(
        outcome=result.outcome,
        route=result.route or "",
        reason=refusal.reason.value if refusal else "",
        kind=refusal.kind if refusal else "",
    ).inc()
    REQUEST_SECONDS.labels(outcome=result.outcome).observe(result.latency_ms / 1000)
    for decision in result.trail:
        NODE_SECONDS.labels(node=decision.node).observe(decision.ms / 1000)
    TOKENS.labels(kind="prompt").inc(result.usage.prompt_tokens)
    TOKENS.labels(kind="completion").inc(result.usage.completion_tokens)
    COST.inc(result.usage.estimated_cost_usd)


def exposition(audit_stats: object | None = None) -> bytes:
    """The text format for /metrics, with the audit sink's counters when there is one."""
    for fate in ("written", "spooled", "flushed", "held"):
        if audit_stats is not None and hasattr(audit_stats, fate):
            AUDIT.labels(fate=fate).set(getattr(audit_stats, fate))
    return generate_latest(REGISTRY)
