"""Qdrant server or cluster (or qdrant-client's local mode, for tests) through qdrant-client.

Each publish fills a new collection `<prefix><kb>__<snapshot>`, stores the KBInfo in that
collection's metadata, then moves the alias `<prefix><kb>` to it in one alias operation: the
data and its KBInfo switch together, and readers (always going through the alias) see the old or
the new snapshot. Collection metadata needs Qdrant server 1.16 or later.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from guardrag.core.store import _common as c
from guardrag.core.store.base import Hit, IndexUnavailable, KBInfo, Point, SearchMode, SparseVector


class _Missing(IndexUnavailable):
    """The alias or collection does not exist."""


def _redact(url: str) -> str:
    """The URL without user:password, so messages can show where without leaking credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _to_qdrant(point: Point) -> models.PointStruct:
    vectors: dict[str, Any] = dict(c.named_vectors(point))
    if point.sparse.indices:
        vectors[c.SPARSE] = models.SparseVector(
            indices=point.sparse.indices, values=point.sparse.values
        )
    return models.PointStruct(id=point.id, vector=vectors, payload=point.payload)


def _from_qdrant(record: models.Record) -> Point:
    return c.point_from_record(record.id, record.vector, record.payload)


class ServerStore:
    """VectorStore on a Qdrant server (url) or qdrant-client local mode (location=":memory:")."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        prefix: str = "guardrag_",
        timeout: int = 10,
    ) -> None:
        if (url is None) == (location is None):
            raise ValueError("give exactly one of url (a Qdrant server) or location (local mode)")
        self._where = _redact(url) if url else str(location)
        self._local = not url
        self._prefix = prefix
        if url:
            # No version probe at start-up: an unreachable server is reported on first use.
            self._client = QdrantClient(
                url=url, api_key=api_key, timeout=timeout, check_compatibility=False
            )
        else:
            self._client = QdrantClient(location=location)
        # Local mode is plain Python objects without locking; a server handles concurrency.
        self._lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self._local else contextlib.nullcontext()
        )

    # -- VectorStore ---------------------------------------------------------------------------

    def list_kbs(self) -> list[str]:
        with self._guard("list aliases"):
            aliases = self._client.get_aliases().aliases
        names = [
            a.alias_name[len(self._prefix) :]
            for a in aliases
            if a.alias_name.startswith(self._prefix)
        ]
        return sorted(name for name in names if c.is_kb_name(name))

    def kb_info(self, kb: str) -> KBInfo | None:
        if not c.is_kb_name(kb):
            return None
        try:
            with self._guard(f"read knowledge base {kb!r}"):
                collection = self._client.get_collection(self._alias(kb))
        except _Missing:
            return None
        meta = (collection.config.metadata or {}).get(c.INFO_KEY)
        if not isinstance(meta, dict):
            raise IndexUnavailable(
                f"knowledge base {kb!r}: collection {self._alias(kb)} at {self._where} has no "
                "guardrag metadata; re-run `guardrag ingest` for it"
            )
        return c.info_from_dict(meta)

    def annotate(self, kb: str, snapshot_id: str, extra: dict[str, Any]) -> bool:
        alias = self._alias(c.check_kb_name(kb))
        with self._guard(f"annotate knowledge base {kb!r}"):
            name = self._target(alias)
            info = self.kb_info(kb)
            if name is None or info is None or info.snapshot_id != snapshot_id:
                return False
            final = dataclasses.replace(info, extra={**info.extra, **extra})
            self._client.update_collection(name, metadata={c.INFO_KEY: c.info_to_dict(final)})
        return True

    def publish(self, kb: str, points: Iterable[Point], info: KBInfo) -> None:
        alias = self._alias(c.check_kb_name(kb))
        name = f"{alias}__{c.snapshot_name(info.snapshot_id)}"
        with self._guard(f"create collection {name}"):
            self._client.create_collection(
                name,
                vectors_config={
                    name: models.VectorParams(size=info.dim, distance=models.Distance.COSINE)
                    for name in (c.DENSE, c.CONTENT)
                },
                sparse_vectors_config={
                    c.SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
            )
        try:
            self._fill(name, points, info.dim)
            with self._guard(f"finish collection {name}"):
                count = self._client.count(name, exact=True).count
                final = c.published_info(info, kb, count)
                self._client.update_collection(name, metadata={c.INFO_KEY: c.info_to_dict(final)})
                old = self._target(alias)
                switch: list[models.AliasOperations] = [
                    models.CreateAliasOperation(
                        create_alias=models.CreateAlias(collection_name=name, alias_name=alias)
                    )
                ]
                if old is not None:
                    delete = models.DeleteAlias(alias_name=alias)
                    switch.insert(0, models.DeleteAliasOperation(delete_alias=delete))
                self._client.update_collection_aliases(change_aliases_operations=switch)
        except BaseException:
            with contextlib.suppress(Exception):
                self._client.delete_collection(name)
            raise
        self._sweep(kb)

    def search(
        self,
        kb: str,
        dense: Sequence[float],
        sparse: SparseVector | None,
        limit: int,
        mode: SearchMode = "hybrid",
    ) -> list[Hit]:
        how = c.plan(mode, sparse)
        query = c.unit(dense)
        alias = self._alias(kb)
        vectors = [c.DENSE, c.CONTENT]
        if how == "nothing":
            with self._reading(kb):  # a missing KB is still an error
                self._client.get_collection(alias)
            return []
        if how != "hybrid":
            nearest: list[float] | models.SparseVector = (
                query
                if how == "dense" or sparse is None
                else models.SparseVector(indices=sparse.indices, values=sparse.values)
            )
            with self._reading(kb):
                found = self._client.query_points(
                    alias,
                    query=nearest,
                    using=c.DENSE if how == "dense" else c.SPARSE,
                    limit=limit,
                    with_payload=True,
                    with_vectors=vectors,
                ).points
            rows = ((str(p.id), dict(p.payload or {}), p.score, p.vector) for p in found)
            return c.hits(rows, query) if how == "dense" else c.sparse_hits(rows, query)
        assert sparse is not None  # plan() chose hybrid
        n = c.prefetch_limit(limit)
        prefetch = [models.Prefetch(query=query, using=name, limit=n) for name in vectors]
        requests: list[models.QueryRequest] = []
        if sparse.indices:  # a query of stop words only: nothing for BM25 to find
            terms = models.SparseVector(indices=sparse.indices, values=sparse.values)
            prefetch.append(models.Prefetch(query=terms, using=c.SPARSE, limit=n))
            requests.append(
                models.QueryRequest(query=terms, using=c.SPARSE, limit=n, with_payload=False)
            )
        fused = models.QueryRequest(
            prefetch=prefetch,
            query=models.RrfQuery(rrf=models.Rrf(k=c.RRF_K)),
            limit=limit,
            with_vector=vectors,
            with_payload=True,
        )
        # The BM25 list rides in the same batch: RRF keeps ranks only, and the Hit needs the score.
        with self._reading(kb):
            results = self._client.query_batch_points(alias, requests=[fused, *requests])
        sparse_scores = {str(p.id): p.score for p in results[1].points} if requests else {}
        return c.hits(
            ((str(p.id), dict(p.payload or {}), p.score, p.vector) for p in results[0].points),
            query,
            sparse_scores,
        )

    def find_by_field(self, kb: str, key: str, value: str, limit: int = 5) -> list[Hit]:
        match = models.FieldCondition(key=key, match=models.MatchValue(value=value))
        with self._reading(kb):
            records, _ = self._client.scroll(
                self._alias(kb),
                scroll_filter=models.Filter(must=[match]),
                limit=limit,
                with_payload=True,
            )
        return c.exact_hits((str(r.id), dict(r.payload or {})) for r in records)

    def points(self, kb: str) -> Iterator[Point]:
        yield from (_from_qdrant(r) for r in self._scroll(kb, with_vectors=True))

    def payloads(self, kb: str) -> Iterator[dict[str, Any]]:
        yield from (dict(r.payload or {}) for r in self._scroll(kb, with_vectors=False))

    def _scroll(self, kb: str, with_vectors: bool) -> Iterator[models.Record]:
        with self._reading(kb):
            # Pin the collection behind the alias, so a publish meanwhile can't mix snapshots.
            name = self._target(self._alias(kb))
        if name is None:
            raise self._missing(kb)
        offset: Any = None
        while True:
            with self._reading(kb):
                records, offset = self._client.scroll(
                    name, offset=offset, limit=c.BATCH, with_payload=True, with_vectors=with_vectors
                )
            yield from records
            if offset is None:
                return

    def drop(self, kb: str) -> None:
        if not c.is_kb_name(kb):
            return
        alias = self._alias(kb)
        with self._guard(f"drop knowledge base {kb!r}"):
            if self._target(alias) is not None:
                delete = models.DeleteAliasOperation(
                    delete_alias=models.DeleteAlias(alias_name=alias)
                )
                self._client.update_collection_aliases(change_aliases_operations=[delete])
        self._sweep(kb)

    def close(self) -> None:
        self._client.close()

    # -- internals -----------------------------------------------------------------------------

    def _alias(self, kb: str) -> str:
        return f"{self._prefix}{kb}"

    def _target(self, alias: str) -> str | None:
        """The collection an alias points to, or None."""
        for a in self._client.get_aliases().aliases:
            if a.alias_name == alias:
                return a.collection_name
        return None

    def _fill(self, name: str, points: Iterable[Point], dim: int) -> None:
        for field in () if self._local else c.INDEXED_FIELDS:  # local mode has no such indexes
            with self._guard(f"index {field} in {name}"):
                self._client.create_payload_index(
                    name, field, models.PayloadSchemaType.KEYWORD, wait=True
                )
        for batch in c.batched(points):
            for point in batch:
                c.check_point(point, dim)
            with self._guard(f"upload points to {name}"):
                self._client.upsert(name, [_to_qdrant(p) for p in batch], wait=True)

    def _sweep(self, kb: str) -> None:
        """Best-effort removal of this KB's collections the alias no longer points to."""
        head = f"{self._alias(kb)}__"
        with contextlib.suppress(IndexUnavailable), self._guard("clean up old collections"):
            live = self._target(self._alias(kb))
            for collection in self._client.get_collections().collections:
                tail = collection.name[len(head) :]
                # The strict match keeps kb "a" off kb "a__b"'s collections.
                ours = collection.name.startswith(head) and c.SNAPSHOT_NAME.match(tail)
                if ours and collection.name != live:
                    self._client.delete_collection(collection.name)

    def _missing(self, kb: str) -> IndexUnavailable:
        return IndexUnavailable(
            f"knowledge base {kb!r} not found at Qdrant {self._where} "
            f"(no alias {self._alias(kb)}); create it with `guardrag ingest`"
        )

    @contextmanager
    def _reading(self, kb: str) -> Iterator[None]:
        """_guard for reads of kb: a missing alias means the KB does not exist."""
        if not c.is_kb_name(kb):
            raise self._missing(kb)
        try:
            with self._guard(f"query knowledge base {kb!r}"):
                yield
        except _Missing:
            raise self._missing(kb) from None

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Serialise local mode and turn client errors into IndexUnavailable naming the server."""
        try:
            with self._lock:
                yield
        except UnexpectedResponse as exc:
            if exc.status_code == 404:
                raise _Missing(f"not found: {what}") from exc
            if exc.status_code in (401, 403):
                raise IndexUnavailable(
                    f"Qdrant at {self._where} refused to {what} (HTTP {exc.status_code}): "
                    "check GUARDRAG_QDRANT_API_KEY"
                ) from exc
            raise IndexUnavailable(
                f"Qdrant at {self._where} failed to {what}: HTTP {exc.status_code} "
                f"{exc.reason_phrase}"
            ) from exc
        except (ResponseHandlingException, httpx.HTTPError, ConnectionError) as exc:
            cause = exc.source if isinstance(exc, ResponseHandlingException) else exc
            raise IndexUnavailable(
                f"cannot reach Qdrant at {self._where} to {what} ({type(cause).__name__}: "
                f"{cause}); check GUARDRAG_QDRANT_URL and that the server is running"
            ) from exc
        except ValueError as exc:
            # Local mode reports a missing collection this way.
            if "not found" in str(exc):
                raise _Missing(f"not found: {what}") from exc
            raise
