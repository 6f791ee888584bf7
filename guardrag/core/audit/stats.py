"""`guardrag audit stats`: outcomes, refusal reasons, per-node latency and cost per day."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from pydantic import BaseModel

from guardrag.core.audit.store import SqlAuditStore
from guardrag.core.audit.store import where as audit_where


class NodeLatency(BaseModel):
    node: str
    runs: int
    p50_ms: float
    p95_ms: float
    max_ms: float


class DayCost(BaseModel):
    day: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class ReasonCount(BaseModel):
    reason: str
    stage: str
    kind: str
    count: int


class AuditStats(BaseModel):
    requests: int
    by_outcome: dict[str, int]
    by_route: dict[str, int]
    by_reason: list[ReasonCount]
    latency_p50_ms: float
    latency_p95_ms: float
    nodes: list[NodeLatency]
    days: list[DayCost]
    feedback: int
    feedback_mean: float | None


def _p(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else 0.0


def compute_stats(
    store: SqlAuditStore, since: str | None = None, kb: str | None = None
) -> AuditStats:
    """Aggregates over the requests since `since` (ISO time or date) and of `kb`, if given."""
    where, params = audit_where(since=since, kb=kb or None)
    q_where, q_params = audit_where(since=since, kb=kb or None, prefix="r.")

    def grouped(column: str) -> dict[str, int]:
        rows = store.query(
            f"SELECT {column}, COUNT(*) FROM requests {where} GROUP BY {column}", params
        )
        return {str(key): int(n) for key, n in rows if key is not None}

    reasons = store.query(
        "SELECT refusal_reason, refusal_stage, refusal_kind, COUNT(*) FROM requests "
        f"{where} {'AND' if where else 'WHERE'} refusal_reason IS NOT NULL "
        "GROUP BY refusal_reason, refusal_stage, refusal_kind",
        params,
    )
    latencies = [
        float(r[0]) for r in store.query(f"SELECT latency_ms FROM requests {where}", params)
    ]
    per_node: dict[str, list[float]] = defaultdict(list)
    for node, ms in store.query(
        "SELECT d.node, d.ms FROM decisions d JOIN requests r ON r.request_id = d.request_id "
        f"{q_where}",
        q_params,
    ):
        per_node[str(node)].append(float(ms))
    days = store.query(
        "SELECT substr(ts, 1, 10) AS day, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), "
        f"SUM(cost_usd) FROM requests {where} GROUP BY substr(ts, 1, 10) ORDER BY day",
        params,
    )
    feedback = store.query(
        "SELECT COUNT(*), AVG(f.score) FROM feedback f JOIN requests r "
        f"ON r.request_id = f.request_id {q_where}",
        q_params,
    )[0]
    return AuditStats(
        requests=len(latencies),
        by_outcome=grouped("outcome"),
        by_route=grouped("route"),
        by_reason=sorted(
            (ReasonCount(reason=r, stage=s, kind=k, count=int(n)) for r, s, k, n in reasons),
            key=lambda c: -c.count,
        ),
        latency_p50_ms=_p(latencies, 50),
        latency_p95_ms=_p(latencies, 95),
        nodes=[
            NodeLatency(
                node=node, runs=len(ms), p50_ms=_p(ms, 50), p95_ms=_p(ms, 95), max_ms=max(ms)
            )
            for node, ms in sorted(per_node.items(), key=lambda item: -len(item[1]))
        ],
        days=[
            DayCost(
                day=str(day),
                requests=int(n),
                prompt_tokens=int(pt or 0),
                completion_tokens=int(ct or 0),
                cost_usd=round(float(cost or 0.0), 6),
            )
            for day, n, pt, ct, cost in days
        ],
        feedback=int(feedback[0]),
        feedback_mean=None if feedback[1] is None else round(float(feedback[1]), 3),
    )


def render_stats(stats: AuditStats) -> str:
    """Plain-text tables for the terminal."""
    lines = [f"requests: {stats.requests}"]
    lines += [f"  {outcome:<10} {n:>7}" for outcome, n in sorted(stats.by_outcome.items())]
    if stats.by_route:
        lines.append("answered by route:")
        lines += [f"  {route:<16} {n:>7}" for route, n in sorted(stats.by_route.items())]
    if stats.by_reason:
        lines.append("refused by reason:")
        lines += [
            f"  {c.reason:<20} {c.stage:<16} {c.kind:<10} {c.count:>7}" for c in stats.by_reason
        ]
    lines.append(
        f"latency per request: p50 {stats.latency_p50_ms:.1f} ms  p95 {stats.latency_p95_ms:.1f} ms"
    )
    if stats.nodes:
        lines.append(f"  {'node':<16} {'runs':>7} {'p50 ms':>9} {'p95 ms':>9} {'max ms':>9}")
        lines += [
            f"  {n.node:<16} {n.runs:>7} {n.p50_ms:>9.2f} {n.p95_ms:>9.2f} {n.max_ms:>9.2f}"
            for n in stats.nodes
        ]
    if stats.days:
        lines.append(
            f"  {'day':<10} {'requests':>9} {'prompt tok':>11} {'compl tok':>10} {'cost USD':>10}"
        )
        lines += [
            f"  {d.day:<10} {d.requests:>9} {d.prompt_tokens:>11} {d.completion_tokens:>10} "
            f"{d.cost_usd:>10.4f}"
            for d in stats.days
        ]
    if stats.feedback:
        lines.append(f"feedback: {stats.feedback} (mean score {stats.feedback_mean})")
    return "\n".join(lines)
