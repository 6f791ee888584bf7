"""Embedded Qdrant Edge: each KB is a folder of immutable shards plus a pointer naming the live one.

    <data_dir>/kbs/<kb>/current.json     {"shard": "<name>", "guardrag_kb": {KBInfo}}
    <data_dir>/kbs/<kb>/shards/<name>/   one Qdrant Edge shard per published snapshot
    <data_dir>/kbs/<kb>/.publish.lock    held while a publish or drop runs

A publish builds a new shard beside the live one, then replaces the pointer (shard name and
KBInfo together) with one os.replace: readers see the old or the new snapshot, never a mix.
Readers stat the pointer on every call and switch shards when it changed, so a running app
serves a re-ingest without restart. Replaced shards are deleted once no process has them open.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from guardrag.core.store import _common as c
from guardrag.core.store import edge_search
from guardrag.core.store.base import (
    Hit,
    IndexDamaged,
    IndexUnavailable,
    KBInfo,
    Point,
    SearchMode,
    SparseVector,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

POINTER = "current.json"
SHARDS = "shards"
PUBLISH_LOCK = ".publish.lock"
#: How long a publish waits for the lock (a sweep holds it briefly; another ingest for long).
PUBLISH_LOCK_WAIT_S = 2.0
_TRASH = ".trash-"
_OPEN_ATTEMPTS = 3
#: How long opening a shard waits out another process's lock on its WAL before the KB is
#: reported locked: a replica copying a just-published shard (store/follow.py) holds a shared
#: lock for the length of the copy, which may fall on the publisher's own calibration reads.
OPEN_LOCK_WAIT_S = 5.0


class _Handle:
    """An open shard and how many users (stores' current pins, in-flight calls) hold it."""

    __slots__ = ("path", "refs", "shard")

    def __init__(self, path: Path, shard: qe.EdgeShard) -> None:
        self.path = path
        self.shard = shard
        self.refs = 0


class _Registry:
    """One open EdgeShard per shard folder in this process.

    The engine locks a shard's WAL on open and refuses a second open even from the same process,
    so all EdgeStore instances share handles; a handle is closed when its last user lets go,
    never while a query on it is still running.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[Path, _Handle] = {}

    def acquire(self, path: Path) -> _Handle:
        with self._lock:
            handle = self._open.get(path)
            if handle is None:
                handle = _Handle(path, qe.EdgeShard.load(str(path)))
                self._open[path] = handle
            handle.refs += 1
            return handle

    def share(self, handle: _Handle) -> None:
        with self._lock:
            handle.refs += 1

    def release(self, handle: _Handle) -> bool:
        """Drop one reference; True when that closed the shard."""
        with self._lock:
            handle.refs -= 1
            if handle.refs > 0:
                return False
            del self._open[handle.path]
            handle.shard.close()
            return True

    def is_open(self, path: Path) -> bool:
        with self._lock:
            return path in self._open


_REGISTRY = _Registry()


@dataclass
class _KB:
    """What a store knows of one KB: the pointer it last read and the shard it pins."""

    key: tuple[int, int, int]
    info: KBInfo
    shard_dir: Path
    handle: _Handle | None = None


def _config(dim: int) -> qe.EdgeConfig:
    # The WAL stays on: besides durability, its lock is what stops two processes from opening
    # one shard (which would let both rewrite its files on close).
    return qe.EdgeConfig(
        vectors={
            name: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)
            for name in (c.DENSE, c.CONTENT)
        },
        sparse_vectors={c.SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        # int8 copies of the dense vectors, searched first and the candidates rescored in float
        # (edge_search.DENSE_SEARCH): a wider HNSW search for less CPU (docs/BENCHMARKS.md).
        quantization_config=qe.ScalarQuantizationConfig(
            qe.ScalarType.Int8, quantile=0.99, always_ram=True
        ),
    )


def _to_edge(point: Point) -> qe.Point:
    vectors: dict[str, Any] = dict(c.named_vectors(point))
    if point.sparse.indices:
        vectors[c.SPARSE] = qe.SparseVector(point.sparse.indices, point.sparse.values)
    return qe.Point(point.id, vectors, point.payload)


def _from_edge(record: qe.Record) -> Point:
    return c.point_from_record(record.id, record.vector, record.payload)


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON so readers see the old file or the new one, even across a crash."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _try_flock(path: Path, create: bool, shared: bool = False) -> int | None:
    """An fd holding an exclusive (or `shared`) flock on path, or None if a holder's lock
    excludes it (or the file is gone)."""
    try:
        fd = os.open(path, (os.O_RDWR | os.O_CREAT) if create else os.O_RDONLY, 0o644)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


@contextmanager
def _publish_lock(kb_dir: Path, kb: str) -> Iterator[None]:
    """The KB's publish lock. A reader sweeping replaced shards holds it for milliseconds, so a
    publish waits up to PUBLISH_LOCK_WAIT_S before it reports the KB as locked."""
    deadline = time.monotonic() + PUBLISH_LOCK_WAIT_S
    while (fd := _try_flock(kb_dir / PUBLISH_LOCK, create=True)) is None:
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    if fd is None:
        raise IndexUnavailable(
            f"knowledge base {kb!r} is locked: another guardrag process is publishing or "
            f"dropping it ({kb_dir / PUBLISH_LOCK}); wait for it to finish and retry"
        )
    try:
        yield
    finally:
        os.close(fd)


def _remove_unless_open(shard_dir: Path) -> None:
    """Delete a replaced shard unless some process still has it open (it holds the WAL lock)."""
    if _REGISTRY.is_open(shard_dir):
        return
    wal = shard_dir / "wal"
    fd = _try_flock(wal, create=False) if wal.exists() else -1
    if fd is None:
        return
    trash = shard_dir.with_name(_TRASH + shard_dir.name)
    try:
        # Renamed while we hold its lock, so nobody can open it half-deleted under its own name.
        os.rename(shard_dir, trash)
    finally:
        if fd >= 0:
            os.close(fd)
    shutil.rmtree(trash, ignore_errors=True)


def _read_pointer(path: Path) -> tuple[tuple[int, int, int], str, KBInfo]:
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        data = json.loads(f.read())
    shard = data["shard"]
    if not isinstance(shard, str) or not c.SNAPSHOT_NAME.match(shard):
        raise ValueError(f"bad shard name {shard!r}")
    return (st.st_ino, st.st_mtime_ns, st.st_size), shard, c.info_from_dict(data[c.INFO_KEY])


class EdgeStore:
    """VectorStore on embedded Qdrant Edge shards under `data_dir`; safe to share across threads."""

    def __init__(self, data_dir: Path) -> None:
        self._root = Path(data_dir).resolve() / "kbs"
        self._lock = threading.Lock()
        self._kbs: dict[str, _KB] = {}

    # -- VectorStore ---------------------------------------------------------------------------

    def list_kbs(self) -> list[str]:
        if not self._root.is_dir():
            return []
        return sorted(
            p.name for p in self._root.iterdir() if c.is_kb_name(p.name) and (p / POINTER).is_file()
        )

    def kb_info(self, kb: str) -> KBInfo | None:
        with self._lock:
            state = self._refresh(kb)
        return state.info if state else None

    def publish(self, kb: str, points: Iterable[Point], info: KBInfo) -> None:
        kb_dir = self._root / c.check_kb_name(kb)
        (kb_dir / SHARDS).mkdir(parents=True, exist_ok=True)
        with _publish_lock(kb_dir, kb):
            shard_dir = kb_dir / SHARDS / c.snapshot_name(info.snapshot_id)
            count = self._build(shard_dir, points, info.dim)
            final = c.published_info(info, kb, count)
            _write_atomic(
                kb_dir / POINTER, {"shard": shard_dir.name, c.INFO_KEY: c.info_to_dict(final)}
            )
            with self._lock:
                self._refresh(kb)  # lets go of our pin on the old shard, so it can go now
            self._sweep_locked(kb_dir)

    def annotate(self, kb: str, snapshot_id: str, extra: dict[str, Any]) -> bool:
        kb_dir = self._root / c.check_kb_name(kb)
        with _publish_lock(kb_dir, kb):
            try:
                _, shard, info = _read_pointer(kb_dir / POINTER)
            except (OSError, ValueError, KeyError) as exc:
                raise IndexDamaged(f"knowledge base {kb!r}: pointer unreadable ({exc})") from exc
            if info.snapshot_id != snapshot_id:
                return False
            final = dataclasses.replace(info, extra={**info.extra, **extra})
            _write_atomic(kb_dir / POINTER, {"shard": shard, c.INFO_KEY: c.info_to_dict(final)})
            with self._lock:
                self._refresh(kb)
        return True

    def search(
        self,
        kb: str,
        dense: Sequence[float],
        sparse: SparseVector | None,
        limit: int,
        mode: SearchMode = "hybrid",
    ) -> list[Hit]:
        how = c.plan(mode, sparse)
        handle, dim = self._acquire(kb)
        try:
            if len(dense) != dim:
                raise ValueError(
                    f"query vector has {len(dense)} dims, knowledge base {kb!r} has {dim}"
                )
            return self._engine(kb, handle, edge_search.search, dense, sparse, limit, how)
        finally:
            self._release(kb, handle)

    def find_by_field(self, kb: str, key: str, value: str, limit: int = 5) -> list[Hit]:
        request = qe.ScrollRequest(
            limit=limit,
            filter=qe.Filter(must=[qe.FieldCondition(key, match=qe.MatchValue(value))]),
            with_payload=True,
        )
        handle, _ = self._acquire(kb)
        try:
            records, _ = self._engine(kb, handle, qe.EdgeShard.scroll, request)
        finally:
            self._release(kb, handle)
        return c.exact_hits((str(r.id), dict(r.payload or {})) for r in records)

    def points(self, kb: str) -> Iterator[Point]:
        yield from (_from_edge(r) for r in self._scroll(kb, with_vector=True))

    def payloads(self, kb: str) -> Iterator[dict[str, Any]]:
        yield from (dict(r.payload or {}) for r in self._scroll(kb, with_vector=False))

    def _scroll(self, kb: str, with_vector: bool) -> Iterator[qe.Record]:
        handle, _ = self._acquire(kb)
        try:
            offset: Any = None
            while True:
                request = qe.ScrollRequest(
                    offset=offset, limit=c.BATCH, with_payload=True, with_vector=with_vector
                )
                records, offset = self._engine(kb, handle, qe.EdgeShard.scroll, request)
                yield from records
                if offset is None:
                    return
        finally:
            self._release(kb, handle)

    def drop(self, kb: str) -> None:
        if not c.is_kb_name(kb) or not (self._root / kb).is_dir():
            return
        kb_dir = self._root / kb
        with _publish_lock(kb_dir, kb):
            (kb_dir / POINTER).unlink(missing_ok=True)
            with self._lock:
                self._refresh(kb)
            self._sweep_locked(kb_dir)
            with suppress(OSError):  # a shard still open elsewhere keeps the folder
                (kb_dir / SHARDS).rmdir()
                (kb_dir / PUBLISH_LOCK).unlink()
                kb_dir.rmdir()

    def close(self) -> None:
        with self._lock:
            states, self._kbs = list(self._kbs.values()), {}
        for state in states:
            if state.handle is not None:
                _REGISTRY.release(state.handle)

    # -- internals -----------------------------------------------------------------------------

    def _build(self, shard_dir: Path, points: Iterable[Point], dim: int) -> int:
        """Write a complete shard at shard_dir and return its point count; on error, remove it."""
        shard = qe.EdgeShard.create(str(shard_dir), _config(dim))
        try:
            for field in c.INDEXED_FIELDS:
                shard.update(
                    qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword)
                )
            for batch in c.batched(points):
                for point in batch:
                    c.check_point(point, dim)
                shard.update(qe.UpdateOperation.upsert_points([_to_edge(p) for p in batch]))
            # Builds the HNSW and payload indexes now, at ingest, rather than on first queries.
            shard.optimize()
            shard.flush()
            count = shard.count(qe.CountRequest(exact=True))
        except BaseException:
            shard.close()
            shutil.rmtree(shard_dir, ignore_errors=True)
            raise
        shard.close()
        return count

    def _refresh(self, kb: str) -> _KB | None:
        """The KB's state after checking its pointer (caller holds self._lock)."""
        cached = self._kbs.get(kb)
        pointer = self._root / kb / POINTER
        try:
            if not c.is_kb_name(kb):
                raise FileNotFoundError(kb)
            st = os.stat(pointer)
            if cached and cached.key == (st.st_ino, st.st_mtime_ns, st.st_size):
                return cached
            key, shard, info = _read_pointer(pointer)
        except FileNotFoundError:
            self._forget(kb)
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexDamaged(
                f"knowledge base {kb!r}: pointer file {pointer} is unreadable ({exc}); "
                "re-run `guardrag ingest` for it"
            ) from exc
        state = _KB(key, info, self._root / kb / SHARDS / shard)
        if cached and cached.shard_dir == state.shard_dir:
            state.handle = cached.handle
        elif cached and cached.handle:
            self._release(kb, cached.handle)
        self._kbs[kb] = state
        return state

    def _forget(self, kb: str) -> None:
        state = self._kbs.pop(kb, None)
        if state and state.handle:
            self._release(kb, state.handle)

    def _acquire(self, kb: str) -> tuple[_Handle, int]:
        """The live shard of kb, with a reference the caller must _release, and its dim."""
        with self._lock:
            attempt, locked_until = 0, time.monotonic() + OPEN_LOCK_WAIT_S
            while True:
                state = self._refresh(kb)
                if state is None:
                    raise IndexUnavailable(
                        f"knowledge base {kb!r} not found in {self._root}; "
                        "create it with `guardrag ingest`"
                    )
                if state.handle is None:
                    try:
                        state.handle = _REGISTRY.acquire(state.shard_dir)
                    except Exception as exc:
                        # A publish may have replaced (and deleted) the shard we were about to open.
                        latest = self._refresh(kb)
                        attempt += 1
                        if attempt < _OPEN_ATTEMPTS and (
                            latest is None or latest.shard_dir != state.shard_dir
                        ):
                            continue
                        if _is_locked(exc) and time.monotonic() < locked_until:
                            time.sleep(0.05)
                            continue
                        raise _open_error(kb, state.shard_dir, exc) from exc
                _REGISTRY.share(state.handle)
                return state.handle, state.info.dim

    def _release(self, kb: str, handle: _Handle) -> None:
        if _REGISTRY.release(handle):
            self._sweep(self._root / kb)

    def _engine(self, kb: str, handle: _Handle, call: Callable[..., T], *args: Any) -> T:
        """call(shard, *args), turning engine errors (all plain Exception) into IndexUnavailable."""
        try:
            return call(handle.shard, *args)
        except Exception as exc:
            raise IndexUnavailable(
                f"knowledge base {kb!r}: query on shard {handle.path} failed ({exc}); "
                "if this persists, re-run `guardrag ingest` to rebuild it"
            ) from exc

    def _sweep(self, kb_dir: Path) -> None:
        """Best-effort removal of replaced shards; skipped while a publish holds the KB."""
        if not kb_dir.is_dir():
            return
        fd = _try_flock(kb_dir / PUBLISH_LOCK, create=True)
        if fd is None:
            return
        try:
            self._sweep_locked(kb_dir)
        finally:
            os.close(fd)

    def _sweep_locked(self, kb_dir: Path) -> None:
        try:
            live: str | None = _read_pointer(kb_dir / POINTER)[1]
        except FileNotFoundError:
            live = None
        except (OSError, ValueError, KeyError, TypeError):
            return  # never delete anything while the live shard is unknown
        shards = kb_dir / SHARDS
        for entry in sorted(shards.iterdir()) if shards.is_dir() else []:
            if entry.name == live:
                continue
            try:
                if entry.name.startswith(_TRASH):
                    shutil.rmtree(entry, ignore_errors=True)
                elif entry.is_dir():
                    _remove_unless_open(entry)
            except OSError as exc:
                log.debug("could not remove old shard %s: %s", entry, exc)


def _is_locked(exc: Exception) -> bool:
    """The engine's open failed on another process's lock on the shard's WAL."""
    detail = str(exc)
    return "WouldBlock" in detail or "temporarily unavailable" in detail


def _open_error(kb: str, shard_dir: Path, exc: Exception) -> IndexUnavailable:
    detail = str(exc)
    if _is_locked(exc):
        return IndexUnavailable(
            f"knowledge base {kb!r} is locked by another guardrag process (shard {shard_dir}); "
            "stop that process, or use a Qdrant server via GUARDRAG_QDRANT_URL to share the index"
        )
    if "ermission denied" in detail:
        return IndexUnavailable(
            f"knowledge base {kb!r}: shard {shard_dir} cannot be opened ({detail}); the engine "
            "needs write access to it, even to read"
        )
    if "does not exist" in detail:
        return IndexDamaged(
            f"knowledge base {kb!r}: its live shard {shard_dir} is missing; "
            "re-run `guardrag ingest` for it"
        )
    return IndexDamaged(
        f"knowledge base {kb!r}: shard {shard_dir} cannot be opened ({detail}); it may be "
        "corrupt: re-run `guardrag ingest` to rebuild it"
    )
