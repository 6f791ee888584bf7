"""Followed knowledge bases: each process serves its own copy of the shards ingest publishes.

Embedded Qdrant Edge admits one process per shard (the engine locks its WAL, and even a read
rewrites files), so replicas and workers cannot share a shard. Instead ingest publishes into
one source directory, as it always does, and every serving process keeps a private copy:

    <source>/kbs/<kb>/current.json              published by ingest (never served from)
    <copies>/<owner>/kbs/<kb>/current.json      this process's copy: an ordinary EdgeStore
    <copies>/<owner>.lock                       flock held while the owner process lives

A follower thread stats every source pointer each `poll_s`. When one names a shard this
process has not copied, it copies that shard (sparse files, milliseconds for the sample KB)
while holding a shared flock on the shard's WAL, which no engine can open meanwhile and
which stops the publisher's sweep from deleting it, then replaces the local pointer with one
os.replace: the process answers from the old snapshot or the new one, never a mix.

Publishing through a following store writes into the source, so ingest can run anywhere the
source is mounted. Copies belong to one process lifetime: a new process starts a fresh copy
and removes those of processes that are gone.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from guardrag.core.store import _common as c
from guardrag.core.store.base import KBInfo, Point
from guardrag.core.store.edge import (
    POINTER,
    SHARDS,
    EdgeStore,
    _publish_lock,
    _try_flock,
    _write_atomic,
)

log = logging.getLogger(__name__)

#: How often the follower looks at the source pointers (a stat each).
POLL_S = 1.0
#: How long a published shard may stay open elsewhere before the follower warns.
WARN_AFTER_S = 10.0
_INCOMING = ".incoming-"


def sparse_copy(src: str, dst: str) -> str:
    """Copy a file's data regions only: Edge preallocates large sparse files (226 MB apparent,
    1.8 MB written for the sample KB), which a plain copy would fill with zeros."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        fout.truncate(size)
        offset = 0
        while offset < size:
            try:
                start = os.lseek(fin.fileno(), offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole is left
                    break
                raise
            end = os.lseek(fin.fileno(), start, os.SEEK_HOLE)
            while start < end:
                chunk = os.pread(fin.fileno(), min(end - start, 1 << 20), start)
                if not chunk:
                    break
                os.pwrite(fout.fileno(), chunk, start)
                start += len(chunk)
            offset = end
    shutil.copymode(src, dst)
    return dst


def _pointer_shard(path: Path) -> tuple[str, dict[str, Any]] | None:
    """The shard a pointer names, with the whole pointer; None when there is no pointer."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    shard = data["shard"]
    if not isinstance(shard, str) or not c.SNAPSHOT_NAME.match(shard):
        raise ValueError(f"bad shard name {shard!r} in {path}")
    return shard, data


def _claim(copies: Path) -> tuple[Path, int]:
    """A fresh copy directory for this process, and the lock fd that marks it alive.

    The lock is taken before the directory exists, so a directory whose lock is free belongs
    to a process that is gone."""
    copies.mkdir(parents=True, exist_ok=True)
    name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fd = os.open(copies / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    own = copies / name
    own.mkdir()
    for entry in copies.iterdir():
        if entry.is_dir() and entry != own:
            _remove_if_dead(entry)
    return own, fd


def _remove_if_dead(copy_dir: Path) -> None:
    lock = copy_dir.with_name(f"{copy_dir.name}.lock")
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        shutil.rmtree(copy_dir, ignore_errors=True)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return  # its owner is alive
    try:
        shutil.rmtree(copy_dir, ignore_errors=True)
        lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


class FollowingEdgeStore(EdgeStore):
    """An EdgeStore over this process's own copies of the KBs published under `source_dir`."""

    def __init__(self, source_dir: Path, copies_dir: Path, *, poll_s: float = POLL_S) -> None:
        self.source = EdgeStore(source_dir)
        self._source_kbs = Path(source_dir).resolve() / "kbs"
        self.copy_dir, self._owner_fd = _claim(Path(copies_dir).resolve())
        super().__init__(self.copy_dir)
        self.poll_s = poll_s
        self.copies = 0  # shards copied since start
        # kb -> the shard we could not copy yet, since when, and whether that was said
        self._waiting: dict[str, tuple[str, float, bool]] = {}
        self._sync_lock = threading.Lock()
        self._stop = threading.Event()
        self.sync()  # serve every published KB from the first request on
        self._thread = threading.Thread(target=self._follow, name="guardrag-kb-follow", daemon=True)
        self._thread.start()

    # -- writes go to the source, then are copied back ------------------------------------------

    def publish(self, kb: str, points: Iterable[Point], info: KBInfo) -> None:
        self.source.publish(kb, points, info)
        self.sync(kb)

    def drop(self, kb: str) -> None:
        self.source.drop(kb)
        self.sync(kb)

    def annotate(self, kb: str, snapshot_id: str, extra: dict[str, Any]) -> bool:
        done = self.source.annotate(kb, snapshot_id, extra)
        self.sync(kb)
        return done

    # -- following ------------------------------------------------------------------------------

    def sync(self, kb: str | None = None) -> list[str]:
        """Bring this process's copies up to the source (one KB, or all); returns the KBs
        whose snapshot changed. A shard an engine holds open is retried on the next poll."""
        with self._sync_lock:
            names = [kb] if kb is not None else self._kb_names()
            return [name for name in names if self._sync_kb(name)]

    def _kb_names(self) -> list[str]:
        published = set(self.source.list_kbs())
        local = set(EdgeStore.list_kbs(self))
        return sorted(published | local)

    def _sync_kb(self, kb: str) -> bool:
        c.check_kb_name(kb)
        published = _pointer_shard(self._source_kbs / kb / POINTER)
        kb_dir = self._root / kb
        local = _pointer_shard(kb_dir / POINTER)
        if published is None:
            if local is None:
                return False
            EdgeStore.drop(self, kb)  # dropped at the source: gone here too
            return True
        shard, pointer = published
        if local is not None and local[1] == pointer:
            return False
        staged = None
        if local is None or local[0] != shard:  # else only the KB's info changed
            staged = self._stage(kb, shard)
            if staged is None:
                return False
        try:
            # Under the KB's lock: a reader's sweep would delete a shard no pointer names yet.
            with _publish_lock(kb_dir, kb):
                if staged is not None and not (kb_dir / SHARDS / shard).is_dir():
                    os.rename(staged, kb_dir / SHARDS / shard)
                _write_atomic(kb_dir / POINTER, pointer)
                with self._lock:
                    self._refresh(kb)  # lets go of the old shard: it is removed once unused
                self._sweep_locked(kb_dir)
        finally:
            if staged is not None:
                shutil.rmtree(staged, ignore_errors=True)
        self.copies += staged is not None
        self._waiting.pop(kb, None)
        return True

    def _stage(self, kb: str, shard: str) -> Path | None:
        """A complete copy of the published shard beside (not in) this KB's shards, or None
        when it cannot be copied now."""
        source = self._source_kbs / kb / SHARDS / shard
        fd = _try_flock(source / "wal", create=False, shared=True)
        if fd is None:
            # Ingest itself reads a shard it just published (its calibration probes), so a
            # short wait is normal; a long one means something serves from the source.
            waiting = self._waiting.get(kb)
            if waiting is None or waiting[0] != shard:
                waiting = self._waiting[kb] = (shard, time.monotonic(), False)
            if source.is_dir() and not waiting[2] and time.monotonic() - waiting[1] >= WARN_AFTER_S:
                self._waiting[kb] = (shard, waiting[1], True)  # said once
                log.warning(
                    "knowledge base %r: snapshot %s has been open in another process for "
                    "%.0f s (is something serving straight from %s?); this process keeps "
                    "its current copy and retries every %.0f s",
                    kb,
                    shard,
                    WARN_AFTER_S,
                    self._source_kbs.parent,
                    self.poll_s,
                )
            return None
        staged = self._root / kb / f"{_INCOMING}{shard}-{uuid.uuid4().hex[:6]}"
        try:
            # Still the published one? A shard replaced meanwhile is not worth copying.
            again = _pointer_shard(self._source_kbs / kb / POINTER)
            if again is None or again[0] != shard:
                return None
            (self._root / kb / SHARDS).mkdir(parents=True, exist_ok=True)
            shutil.copytree(source, staged, copy_function=sparse_copy)
            return staged
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        finally:
            os.close(fd)

    def _follow(self) -> None:
        failing = ""
        while not self._stop.wait(self.poll_s):
            try:
                changed = self.sync()
            except Exception as exc:  # keep following; said once, retried every poll
                if str(exc) != failing:
                    log.exception("following %s failed; retrying", self._source_kbs)
                failing = str(exc)
                continue
            failing = ""
            if changed:
                log.info("knowledge base(s) %s: now serving the published snapshot", changed)

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        super().close()
        self.source.close()
        shutil.rmtree(self.copy_dir, ignore_errors=True)
        lock = self.copy_dir.with_name(f"{self.copy_dir.name}.lock")
        lock.unlink(missing_ok=True)
        os.close(self._owner_fd)


def copies_dir(data_dir: Path) -> Path:
    """Where a process keeps its copies of followed KBs."""
    return Path(data_dir) / "edge-copies"
