"""How EdgeStore searches one shard: few engine calls, each list searched once, and only the
final hits' payloads read."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import qdrant_edge as qe

from guardrag.core.store import _common as c
from guardrag.core.store.base import Hit, SparseVector

#: The dense lists: HNSW over the int8 copies, 128 wide (the engine's default is 100), twice
#: the limit in candidates rescored with the float vectors, so scores and order are float ones.
#: Below the engine's full-scan threshold (~6,600 points) the search is a scan, not HNSW.
DENSE_SEARCH = qe.SearchParams(
    hnsw_ef=128, quantization=qe.QuantizationSearchParams(rescore=True, oversampling=2.0)
)
#: Cosines of given points: exact, from the float vectors.
FLOAT_SCORES = qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))


def search(
    shard: qe.EdgeShard,
    dense: Sequence[float],
    sparse: SparseVector | None,
    limit: int,
    how: c.Plan,
) -> list[Hit]:
    """One search in few engine calls: the ranked lists (ids and scores only), RRF here when
    hybrid, then the payloads of the final hits and nothing else.

    Each list is searched once (a fused engine request would search BM25 a second time for its
    scores: RRF keeps ranks only). A hit's cosines to both vectors are the engine's scores from
    the dense and content lists; the few hits a list did not rank are scored by the engine on
    their ids alone. No stored vector is read: turning 8 hits x 768 floats into Python objects
    cost more than the engine's search of a small KB.
    """
    if how == "nothing":
        return []
    query = c.unit(dense)
    terms = (
        qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=c.SPARSE)
        if sparse is not None and sparse.indices
        else None
    )
    named: dict[str, Any] = {}  # list name -> its query
    if how in ("hybrid", "dense"):
        named[c.DENSE] = qe.Query.Nearest(query, using=c.DENSE)
    if how == "hybrid":
        named[c.CONTENT] = qe.Query.Nearest(query, using=c.CONTENT)
    if how in ("hybrid", "sparse") and terms is not None:  # stop words only: no BM25 list
        named[c.SPARSE] = terms
    n = c.prefetch_limit(limit) if how == "hybrid" else limit
    found = shard.query_batch(
        qe.QueryBatchRequest(
            [
                qe.QueryRequest(
                    limit=n,
                    query=q,
                    with_payload=False,
                    with_vector=False,
                    params=None if name == c.SPARSE else DENSE_SEARCH,
                )
                for name, q in named.items()
            ]
        )
    )
    ids: dict[Any, Any] = {}  # cheap key -> the engine's id (a UUID object)
    scores: dict[str, dict[Any, float]] = {}
    for name, points in zip(named, found, strict=True):
        scores[name] = {}
        for point in points:
            key = _key(point.id)
            ids[key] = point.id
            scores[name][key] = point.score
    if how == "hybrid":
        fused = c.rrf((list(ranked) for ranked in scores.values()), limit)
    else:
        fused = list(scores[c.DENSE if how == "dense" else c.SPARSE].items())
    chosen = [key for key, _ in fused]
    _score_missing(shard, query, chosen, ids, scores)
    payloads = {
        _key(r.id): r.payload for r in shard.retrieve([ids[key] for key in chosen], True, False)
    }
    sparse_scores = scores.get(c.SPARSE, {})
    return [
        Hit(
            id=str(ids[key]),
            payload=dict(payloads[key] or {}),
            fused=score,
            dense=scores[c.DENSE].get(key, 0.0),
            sparse=sparse_scores.get(key) if how != "dense" else None,
            content=scores[c.CONTENT].get(key),
        )
        for key, score in fused
        if key in payloads
    ]


def _score_missing(
    shard: qe.EdgeShard,
    query: list[float],
    chosen: list[Any],
    ids: dict[Any, Any],
    scores: dict[str, dict[Any, float]],
) -> None:
    """Add the cosines of chosen hits that the dense or content list did not rank (a point
    without a content vector stays without one)."""
    missing = {
        name: {ids[key] for key in chosen if key not in scores.setdefault(name, {})}
        for name in (c.DENSE, c.CONTENT)
    }
    asked = {name: pids for name, pids in missing.items() if pids}
    if not asked:
        return
    found = shard.query_batch(
        qe.QueryBatchRequest(
            [
                qe.QueryRequest(
                    limit=len(pids),
                    query=qe.Query.Nearest(query, using=name),
                    filter=qe.Filter(must=[qe.HasIdCondition(pids)]),
                    with_payload=False,
                    with_vector=False,
                    params=FLOAT_SCORES,
                )
                for name, pids in asked.items()
            ]
        )
    )
    for name, points in zip(asked, found, strict=True):
        scores[name].update((_key(p.id), p.score) for p in points)


def _key(pid: Any) -> Any:
    """A point id as a dict key: a UUID hashes in Python code, its integer in C (a hybrid
    search hashes some 300 ids)."""
    return pid.int if isinstance(pid, uuid.UUID) else pid
