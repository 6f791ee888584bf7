"""The vector store interface: one small protocol, two adapters (embedded Qdrant Edge, Qdrant server)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from guardrag.contract import GuardragError

#: "hybrid": title + content vectors + BM25 fused with RRF (title vector only when the sparse
#: query is None); "dense": title vector only; "sparse": BM25 only (the evaluation baselines).
SearchMode = Literal["hybrid", "dense", "sparse"]


class IndexUnavailable(GuardragError, RuntimeError):
    """The index cannot be opened or queried (missing KB, lock held by another process, corrupt shard).

    The message is shown to operators as is: say what failed, where, and what to do.
    """


class IndexDamaged(IndexUnavailable):
    """The KB's files are missing or unreadable (not merely locked): only a rebuild helps."""


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class Point:
    """One FAQ entry or document chunk, as stored.

    id: a UUID string (derived by ingest from the KB name and the row's source key).
    dense: the L2-normalised MiniLM vector (named vector "dense").
    sparse: the BM25 vector (named sparse vector "bm25", IDF modifier on the collection).
    payload: question, answer, text, url, category, source_id, question_norm, content_hash, source_file, kind...
    content: the MiniLM vector of the answer / chunk body (named vector "content"), when given:
        the title vector catches paraphrased questions, the content vector what the entry says.
    """

    id: str
    dense: list[float]
    sparse: SparseVector
    payload: dict[str, Any]
    content: list[float] | None = None


@dataclass(frozen=True)
class Hit:
    """A retrieved point with every score the rerank stage may need.

    fused: the RRF-fused score (or the dense score when BM25 is off).
    dense: cosine similarity of the query to the point's dense vector (always set).
    sparse: the BM25 score when the point was found by the sparse query, else None.
    content: cosine of the query to the point's content vector, when it has one.
    """

    id: str
    payload: dict[str, Any]
    fused: float
    dense: float
    sparse: float | None = None
    content: float | None = None


@dataclass(frozen=True)
class KBInfo:
    """A knowledge base's metadata, published atomically with its points."""

    name: str
    snapshot_id: str
    count: int
    dim: int
    description: str = ""
    fallback_url: str | None = None
    updated_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class VectorStore(Protocol):
    """What the pipeline and ingest need from Qdrant, whatever the deployment."""

    def list_kbs(self) -> list[str]: ...

    def kb_info(self, kb: str) -> KBInfo | None:
        """The published metadata of a KB, or None if it does not exist."""
        ...

    def publish(self, kb: str, points: Iterable[Point], info: KBInfo) -> None:
        """Replace the KB's content with these points, atomically: readers see the old or the new
        snapshot, never a mix; on any error nothing is published and the old snapshot stays."""
        ...

    def annotate(self, kb: str, snapshot_id: str, extra: dict[str, Any]) -> bool:
        """Merge `extra` into the published info of `kb` if its live snapshot is still
        `snapshot_id`: facts derived from a snapshot after it is published (its calibration).
        False when another snapshot has replaced it meanwhile (nothing is written)."""
        ...

    def points(self, kb: str) -> Iterable[Point]:
        """Every point of the KB's current snapshot, with vectors and payload (ingest reuses
        unchanged rows' vectors and keeps rows of other source files from it)."""
        ...

    def payloads(self, kb: str) -> Iterable[dict[str, Any]]:
        """Every payload of the KB's current snapshot, without vectors (KB statistics read
        these: at 10k points, fetching the vectors too was half the first question's wait)."""
        ...

    def search(
        self,
        kb: str,
        dense: Sequence[float],
        sparse: SparseVector | None,
        limit: int,
        mode: SearchMode = "hybrid",
    ) -> list[Hit]:
        """Hybrid search (title and content vectors + BM25, fused with RRF); title vector only
        when sparse is None or mode is "dense"; BM25 only when mode is "sparse" (fused and sparse
        are then the BM25 score, and an empty or missing sparse query finds nothing). Hits carry
        the cosines to both dense vectors whatever the mode."""
        ...

    def find_by_field(self, kb: str, key: str, value: str, limit: int = 5) -> list[Hit]:
        """Points whose payload `key` equals `value` exactly (keyword index); scores are 1.0."""
        ...

    def drop(self, kb: str) -> None: ...

    def close(self) -> None: ...
