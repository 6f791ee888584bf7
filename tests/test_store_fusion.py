"""The Edge adapter fuses its hybrid lists itself (store/_common.rrf): the same RRF the engine
computes, each list searched once, only the final hits' payloads read and no stored vector (the
cosines are the engine's scores)."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from guardrag.core.store import KBInfo, Point
from guardrag.core.store import _common as c
from guardrag.core.store.bm25 import encode_documents, encode_query
from guardrag.core.store.edge import SHARDS, EdgeStore

DIM = 16
WORDS = [
    "card",
    "pin",
    "reset",
    "refund",
    "wallet",
    "limit",
    "transfer",
    "fee",
    "bank",
    "otp",
    "account",
    "verify",
    "top",
    "up",
]


def reference_rrf(lists: list[list[uuid.UUID]], limit: int) -> list[tuple[uuid.UUID, float]]:
    """RRF written out in numpy float32, the engine's arithmetic."""
    scores: dict[uuid.UUID, np.float32] = {}
    for ids in lists:
        for rank, pid in enumerate(ids):
            part = np.float32(1.0) / np.float32(rank + c.RRF_K)
            scores[pid] = scores[pid] + part if pid in scores else part
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [(pid, float(score)) for pid, score in best]


def test_rrf_is_the_engines_float32_sum_with_ties_to_the_smaller_id() -> None:
    rng = random.Random(3)
    pool = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(90)]
    for _ in range(300):
        lists = [rng.sample(pool, rng.randint(0, 40)) for _ in range(rng.choice((2, 3)))]
        assert c.rrf(lists, 20) == reference_rrf(lists, 20)
    a, b = sorted(pool[:2])
    assert c.rrf([[b], [a]], 2) == [(a, pytest.approx(1 / c.RRF_K)), (b, pytest.approx(1 / 60))]
    assert c.rrf([[a, b], [b]], 1)[0][0] == b  # in both lists beats first in one
    assert c.rrf([], 8) == []


def _points(count: int, seed: int) -> list[Point]:
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=6)) for _ in range(count)]
    titles, bodies = (rng.standard_normal((count, DIM)) for _ in range(2))
    return [
        Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")), t.tolist(), s, {"i": i}, b.tolist())
        for i, (t, b, s) in enumerate(zip(titles, bodies, encode_documents(texts), strict=True))
    ]


def test_edge_hybrid_search_equals_the_engines_fused_query(tmp_path: Path) -> None:
    """Same hits, fused scores, cosines and BM25 scores as one engine query with RRF over
    prefetches (ties aside: the engine orders them differently from run to run)."""
    points = _points(300, 5)
    store = EdgeStore(tmp_path)
    store.publish("kb", points, KBInfo("kb", "s1", 0, DIM))
    by_id = {p.id: p for p in points}
    rng = np.random.default_rng(6)
    queries = [
        (rng.standard_normal(DIM).tolist(), " ".join(rng.choice(WORDS, 3))) for _ in range(40)
    ]
    found = [
        (store.search("kb", dense, encode_query(text), limit=8), dense, text)
        for dense, text in queries
    ]
    store.close()
    shard = qe.EdgeShard.load(str(next((tmp_path / "kbs" / "kb" / SHARDS).iterdir())))
    try:
        for hits, dense, text in found:
            query, terms = c.unit(dense), encode_query(text)
            sparse = qe.Query.Nearest(qe.SparseVector(terms.indices, terms.values), using=c.SPARSE)
            prefetches = [
                qe.Prefetch(limit=40, query=qe.Query.Nearest(query, using=name))
                for name in (c.DENSE, c.CONTENT)
            ] + [qe.Prefetch(limit=40, query=sparse)]
            engine = shard.query(
                qe.QueryRequest(limit=8, prefetches=prefetches, query=qe.Fusion.Rrf(k=c.RRF_K))  # type: ignore[arg-type]
            )
            bm25 = {
                str(p.id): p.score for p in shard.query(qe.QueryRequest(limit=40, query=sparse))
            }
            assert [h.fused for h in hits] == [p.score for p in engine]
            cut = engine[-1].score  # the last score's ties may be cut differently
            assert {h.id for h in hits if h.fused > cut} == {
                str(p.id) for p in engine if p.score > cut
            }
            for hit in hits:
                point = by_id[hit.id]
                assert hit.sparse == bm25.get(hit.id)
                # The engine's float32 cosine of its normalised copies: 1e-7 from float64's.
                assert hit.dense == pytest.approx(c.cosine(query, point.dense), abs=1e-6)
                assert hit.content == pytest.approx(c.cosine(query, point.content or []), abs=1e-6)
                assert hit.payload == point.payload
    finally:
        shard.close()
