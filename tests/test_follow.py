"""Followed knowledge bases: each process serves its own copy of the Qdrant Edge shards
published in a source directory (replicas and `serve --workers` on embedded Edge)."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import qdrant_edge as qe

from guardrag.config.settings import Settings
from guardrag.core.store import _common as c
from guardrag.core.store import follow, store_from_settings
from guardrag.core.store.bm25 import encode_query
from guardrag.core.store.edge import POINTER, SHARDS, EdgeStore, _write_atomic
from guardrag.core.store.follow import FollowingEdgeStore, copies_dir, sparse_copy
from tests.test_store import FAQ, info, make_points, near

KB = "faq"


@pytest.fixture
def source(tmp_path: Path) -> Iterator[EdgeStore]:
    store = EdgeStore(tmp_path / "published")
    store.publish(KB, make_points(FAQ), info("s1"))
    yield store
    store.close()


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[Callable[..., FollowingEdgeStore]]:
    made: list[FollowingEdgeStore] = []

    def make(poll_s: float = 0.05) -> FollowingEdgeStore:
        store = FollowingEdgeStore(tmp_path / "published", tmp_path / "copies", poll_s=poll_s)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def snapshot(store: EdgeStore) -> str | None:
    found = store.kb_info(KB)
    return found.snapshot_id if found else None


def top(store: EdgeStore, key: str) -> str:
    hits = store.search(KB, near(key), encode_query(FAQ.get(key, key)), 1)
    return str(hits[0].payload["source_id"])


def test_followers_serve_their_own_copy_of_each_publish(
    source: EdgeStore, follower: Callable[..., FollowingEdgeStore], tmp_path: Path
) -> None:
    first, second = follower(), follower()
    for store in (first, second):
        assert store.list_kbs() == [KB] and store.kb_info(KB) is not None
        assert top(store, "pw") == "pw"  # answered from its copy, the engine's own search
    assert first.copy_dir != second.copy_dir
    old_copy = first.copy_dir / "kbs" / KB / SHARDS
    old_shards = {p.name for p in old_copy.iterdir()}

    texts = {**FAQ, "new": "How do I close my account?"}
    source.publish(KB, make_points(texts), info("s2"))
    for store in (first, second):
        assert eventually(lambda s=store: snapshot(s) == "s2")  # type: ignore[misc]
        assert top(store, "new") == "new"
    # The replaced copy is gone once nothing reads it; only the live one stays.
    assert eventually(lambda: not old_shards & {p.name for p in old_copy.iterdir()})
    assert eventually(lambda: first.copies == second.copies == 2)


def test_a_change_of_the_kb_info_alone_is_followed_without_a_copy(
    source: EdgeStore, follower: Callable[..., FollowingEdgeStore], tmp_path: Path
) -> None:
    store, other = follower(), follower()
    pointer = tmp_path / "published" / "kbs" / KB / POINTER
    data = json.loads(pointer.read_text())
    data[c.INFO_KEY]["extra"]["calibrated"] = "yes"  # what annotating a snapshot writes
    _write_atomic(pointer, data)
    assert eventually(lambda: store.kb_info(KB).extra.get("calibrated") == "yes")  # type: ignore[union-attr]
    assert store.copies == 1
    # Annotating through a follower writes the source, which every follower then serves.
    assert other.annotate(KB, "s1", {"calibrated": "twice"})
    assert not other.annotate(KB, "s0", {"calibrated": "stale"})  # not the live snapshot
    assert other.kb_info(KB).extra["calibrated"] == "twice"  # type: ignore[union-attr]
    assert eventually(lambda: store.kb_info(KB).extra.get("calibrated") == "twice")  # type: ignore[union-attr]


def test_publish_and_drop_through_a_follower_reach_the_source_and_every_follower(
    source: EdgeStore, follower: Callable[..., FollowingEdgeStore], tmp_path: Path
) -> None:
    writer, reader = follower(), follower()
    writer.publish("other", make_points({"x": "Where is my parcel?"}), info("o1"))
    assert (tmp_path / "published" / "kbs" / "other" / POINTER).is_file()
    assert writer.kb_info("other") is not None  # its own copy at once
    assert eventually(lambda: reader.list_kbs() == [KB, "other"])
    writer.drop("other")
    assert not (tmp_path / "published" / "kbs" / "other" / POINTER).exists()
    assert eventually(lambda: reader.list_kbs() == [KB])


def test_a_shard_held_open_elsewhere_is_not_copied_until_it_is_free(
    source: EdgeStore,
    follower: Callable[..., FollowingEdgeStore],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(follow, "WARN_AFTER_S", 0.0)  # say it at the first refusal
    store = follower(poll_s=3600)  # synced by hand below
    source.publish(KB, make_points({**FAQ, "new": "Close my account"}), info("s2"))
    live = tmp_path / "published" / "kbs" / KB / SHARDS
    [shard] = [p for p in live.iterdir() if p.is_dir()]
    # A process serving straight from the source: the engine holds the shard (and rewrites
    # files as it opens), so a copy now could be torn.
    held = qe.EdgeShard.load(str(shard))
    try:
        with caplog.at_level(logging.WARNING):
            assert store.sync() == []
            assert store.sync() == []
        assert caplog.text.count("open in another process") == 1
        assert snapshot(store) == "s1"
    finally:
        held.close()
    assert store.sync() == [KB]
    assert snapshot(store) == "s2"


def test_the_publisher_waits_out_a_copy_in_progress(tmp_path: Path) -> None:
    """Ingest reads the shard it just published (calibration) while replicas may be copying
    it under a shared lock on its WAL: opening it waits for the copy instead of reporting the
    KB locked by another process (seen with `serve --workers 2` and a re-ingest)."""
    published = tmp_path / "published"
    EdgeStore(published).publish(KB, make_points(FAQ), info("s1"))  # closed: nothing open
    [shard] = [p for p in (published / "kbs" / KB / SHARDS).iterdir() if p.is_dir()]
    fd = follow._try_flock(shard / "wal", create=False, shared=True)  # a follower copying it
    assert fd is not None
    threading.Timer(0.5, os.close, (fd,)).start()
    store = EdgeStore(published)
    try:
        began = time.monotonic()
        assert top(store, "pw") == "pw"
        assert time.monotonic() - began >= 0.4  # it did wait for the lock
    finally:
        store.close()


def test_copies_of_processes_that_are_gone_are_removed(
    source: EdgeStore, follower: Callable[..., FollowingEdgeStore], tmp_path: Path
) -> None:
    copies = tmp_path / "copies"
    dead, alive = copies / "111-dead", copies / "222-alive"
    for directory in (dead, alive):
        (directory / "kbs").mkdir(parents=True)
        (copies / f"{directory.name}.lock").touch()
    holder = os.open(copies / f"{alive.name}.lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # its owner still runs
    try:
        store = follower()
        assert not dead.exists() and alive.exists()
        store.close()
        assert not store.copy_dir.exists()  # a clean stop removes its own copy
    finally:
        os.close(holder)


def test_settings_choose_a_following_store(tmp_path: Path, source: EdgeStore) -> None:
    settings = Settings(data_dir=tmp_path / "replica", edge_source_dir=tmp_path / "published")
    store = store_from_settings(settings)
    assert isinstance(store, FollowingEdgeStore)
    assert store.copy_dir.parent == copies_dir(settings.data_dir).resolve()
    assert store.list_kbs() == [KB]
    store.close()
    assert type(store_from_settings(Settings(data_dir=tmp_path))) is EdgeStore


def test_sparse_copy_keeps_holes_and_bytes(tmp_path: Path) -> None:
    src, dst = tmp_path / "sparse", tmp_path / "copy"
    with src.open("wb") as f:
        f.truncate(64 << 20)
        f.seek(5 << 20)
        f.write(b"data" * 1024)
        f.seek((64 << 20) - 3)
        f.write(b"end")
    sparse_copy(str(src), str(dst))
    assert dst.read_bytes() == src.read_bytes()
    assert dst.stat().st_blocks * 512 < 1 << 20  # 64 MiB long, a few KiB on disk
