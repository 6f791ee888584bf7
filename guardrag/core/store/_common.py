"""What both adapters share: names, RRF settings, KBInfo (de)serialisation and Hit building."""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import re
import struct
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from guardrag.core.store.base import Hit, KBInfo, Point, SparseVector

DENSE = "dense"
CONTENT = "content"
SPARSE = "bm25"
INDEXED_FIELDS = ("question_norm", "question_key", "source_id", "source_file")
INFO_KEY = "guardrag_kb"  # where KBInfo lives: pointer file (edge), collection metadata (server)

# The RRF constant of the paper (Cormack et al.): 1/(k + rank) with rank 0 for the best hit, so a
# point first in both lists scores 2/60 ≈ 0.033. Set explicitly so both adapters fuse the same.
RRF_K = 60
BATCH = 256

T = TypeVar("T")

_KB_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def is_kb_name(kb: str) -> bool:
    """KB names become directory and collection names (same rule as config.settings)."""
    return bool(_KB_NAME.match(kb))


def check_kb_name(kb: str) -> str:
    if not is_kb_name(kb):
        raise ValueError(
            f"knowledge base name must be 1-64 letters, digits, '-' or '_', got {kb!r}"
        )
    return kb


def snapshot_name(snapshot_id: str) -> str:
    """A unique, path- and collection-safe name for one published snapshot.

    The random tail keeps it unique when identical content (same snapshot id) is republished.
    """
    stem = re.sub(r"[^A-Za-z0-9-]+", "-", snapshot_id).strip("-")[:40] or "snapshot"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{stem}_{uuid.uuid4().hex[:8]}"


SNAPSHOT_NAME = re.compile(r"^[0-9]{8}T[0-9]{6}-[A-Za-z0-9-]+_[0-9a-f]{8}$")


def rrf(ranked: Iterable[Sequence[T]], limit: int, k: int = RRF_K) -> list[tuple[T, float]]:
    """Reciprocal rank fusion of ranked id lists, as Qdrant computes it: 1/(k + rank) per list
    (rank 0 best), summed in float32 in list order; ties go to the smaller id (the engine's
    own order among ties changes from process to process).

    The Edge adapter fuses here instead of in the engine, so each list is searched once and
    only the fused hits' payloads are read (see edge_search.search).
    """
    scores: dict[T, float] = {}
    for ids in ranked:
        parts = _rrf_shares(k, max(len(ids), 64))  # a few cache entries, not one per length
        for pid, part in zip(ids, parts, strict=False):
            # The sum of two float32 values is exact as a double: rounding it once to float32
            # is what the engine's float32 addition gives.
            scores[pid] = _f32(scores[pid] + part) if pid in scores else part
    return heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))


def _f32(value: float) -> float:
    """value rounded to the nearest float32."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


@functools.lru_cache(maxsize=8)
def _rrf_shares(k: int, count: int) -> tuple[float, ...]:
    """The float32 share of ranks 0..count-1."""
    return tuple(_f32(1.0 / (rank + k)) for rank in range(count))


def prefetch_limit(limit: int) -> int:
    """Candidates each retriever hands to RRF: enough that a point low in one list still counts."""
    return max(4 * limit, 40)


def check_point(point: Point, dim: int) -> None:
    for name, vector in named_vectors(point).items():
        if len(vector) != dim:
            raise ValueError(
                f"point {point.id}: {name} vector has {len(vector)} dims, the KB has {dim}"
            )
    if len(point.sparse.indices) != len(point.sparse.values):
        raise ValueError(f"point {point.id}: sparse vector has mismatched indices and values")


def batched(points: Iterable[Point], size: int = BATCH) -> Iterator[list[Point]]:
    batch: list[Point] = []
    for point in points:
        batch.append(point)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def published_info(info: KBInfo, kb: str, count: int) -> KBInfo:
    """The KBInfo as stored: the store's name and point count are the truth."""
    updated = info.updated_at or datetime.now(UTC).isoformat(timespec="seconds")
    return dataclasses.replace(info, name=kb, count=count, updated_at=updated)


def info_to_dict(info: KBInfo) -> dict[str, Any]:
    return dataclasses.asdict(info)


def info_from_dict(data: dict[str, Any]) -> KBInfo:
    """Tolerates unknown keys, so an older guardrag reads a newer pointer."""
    known = {f.name for f in dataclasses.fields(KBInfo)}
    return KBInfo(**{k: v for k, v in data.items() if k in known})


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [float(x) / norm for x in vector] if norm else [float(x) for x in vector]


def cosine(query_unit: Sequence[float], vector: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in vector))
    if not norm:
        return 0.0
    return sum(a * b for a, b in zip(query_unit, vector, strict=True)) / norm


def dense_vector(vectors: object, name: str = DENSE) -> list[float]:
    """One entry of an engine's named-vector dict, as floats ([] if absent)."""
    value = vectors.get(name) if isinstance(vectors, dict) else None
    return [float(x) for x in value] if isinstance(value, list) else []


def point_from_record(pid: object, vectors: object, payload: dict[str, Any] | None) -> Point:
    """A Point from either engine's record (their sparse vectors share indices/values)."""
    named = vectors if isinstance(vectors, dict) else {}
    sparse = named.get(SPARSE)
    indices, values = getattr(sparse, "indices", None), getattr(sparse, "values", None)
    return Point(
        id=str(pid),
        dense=dense_vector(named),
        sparse=SparseVector(list(indices), list(values))
        if indices is not None and values is not None
        else SparseVector([], []),
        payload=dict(payload or {}),
        content=dense_vector(named, CONTENT) or None,
    )


def named_vectors(point: Point) -> dict[str, list[float]]:
    """The dense named vectors a point carries (content is optional)."""
    vectors = {DENSE: point.dense}
    if point.content is not None:
        vectors[CONTENT] = point.content
    return vectors


def hits(
    rows: Iterable[tuple[str, dict[str, Any], float, object]],
    query_unit: Sequence[float],
    sparse_scores: dict[str, float] | None = None,
) -> list[Hit]:
    """Hits from (id, payload, engine score, stored named vectors) rows.

    With `sparse_scores` (a hybrid query) the engine score is the RRF score; without, it is the
    title cosine. Cosines to both stored vectors are computed here, so every Hit has them.
    """
    # lazy: numpy costs `guardrag kbs` a tenth of a second; only a search needs it
    import numpy as np

    found = list(rows)
    # Every stored vector of the hits in one matrix, one product: the pure-Python cosines of
    # 8 hits x 2 vectors were 60% of a small KB's search CPU, one numpy call per vector 20%.
    stored: list[list[float]] = []
    where: list[dict[str, int]] = []
    for _, _, _, vectors in found:
        named = vectors if isinstance(vectors, dict) else {}
        slots = {}
        for name in (DENSE, CONTENT):
            vector = named.get(name)
            if isinstance(vector, list) and vector:
                slots[name] = len(stored)
                stored.append(vector)
        where.append(slots)
    cosines: list[float] = []
    if stored:
        matrix = np.asarray(stored, dtype=np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
        dots = matrix @ np.asarray(query_unit, dtype=np.float64)
        cosines = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0).tolist()

    def cosine_of(slots: dict[str, int], name: str) -> float | None:
        return cosines[slots[name]] if name in slots else None

    return [
        Hit(
            id=pid,
            payload=payload,
            fused=score,
            dense=(cosine_of(slots, DENSE) or 0.0) if sparse_scores is not None else score,
            sparse=(sparse_scores or {}).get(pid),
            content=cosine_of(slots, CONTENT),
        )
        for (pid, payload, score, _), slots in zip(found, where, strict=True)
    ]


Plan = Literal["hybrid", "dense", "sparse", "nothing"]


def plan(mode: str, sparse: SparseVector | None) -> Plan:
    """Which query a search runs: an unknown mode is a bug and raises; a BM25-only query with no
    terms (None, or stop words only) has nothing to find."""
    if mode not in ("hybrid", "dense", "sparse"):
        raise ValueError(f"search mode must be 'hybrid', 'dense' or 'sparse', got {mode!r}")
    if mode == "sparse":
        return "sparse" if sparse is not None and sparse.indices else "nothing"
    return "dense" if mode == "dense" or sparse is None else "hybrid"


def sparse_hits(
    rows: Iterable[tuple[str, dict[str, Any], float, object]], query_unit: Sequence[float]
) -> list[Hit]:
    """Hits of a BM25-only query: the engine score is both the fused and the sparse score."""
    found = list(rows)
    return hits(found, query_unit, {pid: score for pid, _, score, _ in found})


def exact_hits(rows: Iterable[tuple[str, dict[str, Any]]]) -> list[Hit]:
    return [Hit(id=pid, payload=payload, fused=1.0, dense=1.0) for pid, payload in rows]
