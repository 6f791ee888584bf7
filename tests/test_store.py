"""One behavioural suite for both VectorStore adapters, plus what only the embedded one can do."""

from __future__ import annotations

import fcntl
import os
import random
import subprocess
import sys
import threading
import uuid
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from guardrag.core.store import (
    IndexUnavailable,
    KBInfo,
    Point,
    SparseVector,
    VectorStore,
    open_store,
)
from guardrag.core.store import _common as c
from guardrag.core.store.bm25 import encode_documents, encode_query
from guardrag.core.store.edge import POINTER, PUBLISH_LOCK, SHARDS, EdgeStore
from guardrag.core.store.server import ServerStore

DIM = 8
REPO = Path(__file__).resolve().parents[1]

FAQ = {
    "pw": "How do I reset my password?",
    "bill": "Where can I download my invoice?",
    "ship": "How long does shipping take?",
    "zeb": "Zebracorn warranty registration",
    "ret": "Can I return an item after thirty days?",
}


def vec(name: str) -> list[float]:
    rng = random.Random(zlib.crc32(name.encode()))
    return c.unit([rng.gauss(0, 1) for _ in range(DIM)])


def near(name: str, noise: float = 0.05) -> list[float]:
    rng = random.Random(7)
    return [x + rng.gauss(0, noise) for x in vec(name)]


def make_points(texts: dict[str, str], source_file: str = "faq.csv") -> list[Point]:
    sparse = encode_documents(list(texts.values()))
    points = []
    for (key, text), sv in zip(texts.items(), sparse, strict=True):
        dense = [-x for x in vec("ship")] if key == "zeb" else vec(key)  # zeb: lexical only
        payload = {
            "question": text,
            "question_norm": text.lower(),
            "source_id": key,
            "source_file": source_file,
        }
        points.append(Point(id=pid(key), dense=dense, sparse=sv, payload=payload))
    return points


def pid(key: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, key))


def info(snapshot: str, count: int = 0) -> KBInfo:
    return KBInfo(
        name="faq",
        snapshot_id=snapshot,
        count=count,
        dim=DIM,
        description="test KB",
        fallback_url="https://example.com/help",
        extra={"lang": "en"},
    )


@pytest.fixture(params=["edge", "server"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    s: VectorStore = (
        EdgeStore(tmp_path) if request.param == "edge" else ServerStore(location=":memory:")
    )
    yield s
    s.close()


@pytest.fixture
def faq(store: VectorStore) -> VectorStore:
    store.publish("faq", make_points(FAQ), info("s1"))
    return store


def ids(hits: list) -> list[str]:
    return [h.id for h in hits]


# -- shared suite ------------------------------------------------------------------------------


def test_publish_then_info_and_list(faq: VectorStore) -> None:
    got = faq.kb_info("faq")
    assert got is not None
    assert (got.name, got.snapshot_id, got.count, got.dim) == ("faq", "s1", len(FAQ), DIM)
    assert got.fallback_url == "https://example.com/help"
    assert got.extra == {"lang": "en"}
    assert got.updated_at  # filled in when the caller left it empty
    assert faq.list_kbs() == ["faq"]
    assert faq.kb_info("nope") is None
    assert faq.kb_info("../etc") is None


def test_dense_only_search(faq: VectorStore) -> None:
    hits = faq.search("faq", near("pw"), None, limit=3)
    assert ids(hits)[0] == pid("pw")
    assert len(hits) == 3
    assert all(h.sparse is None and h.fused == h.dense for h in hits)
    assert hits[0].dense > 0.95


def test_hybrid_search_scores(faq: VectorStore) -> None:
    query = near("pw")
    hits = faq.search("faq", query, encode_query("reset my password"), limit=5)
    top = hits[0]
    assert top.id == pid("pw")
    assert top.sparse is not None and top.sparse > 0
    assert top.fused == pytest.approx(2 / c.RRF_K, rel=1e-3)  # first in both lists
    assert [h.fused for h in hits] == sorted((h.fused for h in hits), reverse=True)
    by_id = {p.id: p for p in make_points(FAQ)}
    for hit in hits:  # dense is the true cosine, whichever list found the point
        expected = c.cosine(c.unit(query), by_id[hit.id].dense)
        assert hit.dense == pytest.approx(expected, abs=1e-4)
    assert [h.sparse for h in hits[1:]] == [None] * (len(hits) - 1)


def test_lexical_match_surfaces_a_dense_outlier(faq: VectorStore) -> None:
    dense_only = faq.search("faq", vec("ship"), None, limit=3)
    assert pid("zeb") not in ids(dense_only)
    hits = faq.search("faq", vec("ship"), encode_query("zebracorn"), limit=3)
    assert ids(hits)[0] == pid("zeb")
    assert hits[0].sparse is not None and hits[0].dense < -0.9


def test_query_of_stop_words_only(faq: VectorStore) -> None:
    empty = encode_query("the of and")
    assert empty.indices == []
    hits = faq.search("faq", near("bill"), empty, limit=2)
    assert ids(hits)[0] == pid("bill")
    assert all(h.sparse is None for h in hits)
    assert hits[0].fused == pytest.approx(1 / c.RRF_K, rel=1e-3)


def test_dense_mode_ignores_the_sparse_query(faq: VectorStore) -> None:
    hits = faq.search("faq", vec("ship"), encode_query("zebracorn"), limit=3, mode="dense")
    assert ids(hits) == ids(faq.search("faq", vec("ship"), None, limit=3))
    assert pid("zeb") not in ids(hits)
    assert all(h.sparse is None and h.fused == h.dense for h in hits)


def test_sparse_only_search(faq: VectorStore) -> None:
    query = vec("ship")
    hits = faq.search("faq", query, encode_query("zebracorn warranty"), limit=5, mode="sparse")
    assert ids(hits) == [pid("zeb")]  # BM25 finds only points that share a term
    (top,) = hits
    assert top.sparse is not None and top.sparse > 0 and top.fused == top.sparse
    by_id = {p.id: p for p in make_points(FAQ)}
    assert top.dense == pytest.approx(c.cosine(c.unit(query), by_id[top.id].dense), abs=1e-4)
    ranked = faq.search(
        "faq", query, encode_query("reset password invoice"), limit=5, mode="sparse"
    )
    assert set(ids(ranked)) == {pid("pw"), pid("bill")}
    assert [h.fused for h in ranked] == sorted((h.fused for h in ranked), reverse=True)


def test_sparse_only_search_without_terms(faq: VectorStore) -> None:
    assert faq.search("faq", vec("pw"), encode_query("the of and"), limit=3, mode="sparse") == []
    assert faq.search("faq", vec("pw"), None, limit=3, mode="sparse") == []
    with pytest.raises(IndexUnavailable, match="not found"):
        faq.search("nope", vec("pw"), None, limit=3, mode="sparse")


def test_unknown_search_mode(faq: VectorStore) -> None:
    with pytest.raises(ValueError, match="search mode"):
        faq.search("faq", vec("pw"), None, limit=3, mode="fuzzy")  # type: ignore[arg-type]


def test_find_by_field(faq: VectorStore) -> None:
    hits = faq.find_by_field("faq", "question_norm", FAQ["ship"].lower())
    assert ids(hits) == [pid("ship")]
    assert (hits[0].fused, hits[0].dense) == (1.0, 1.0)
    assert hits[0].payload["source_id"] == "ship"
    assert faq.find_by_field("faq", "question_norm", FAQ["ship"]) == []  # exact, not case-folded
    assert len(faq.find_by_field("faq", "source_file", "faq.csv", limit=2)) == 2


def test_points_round_trip(faq: VectorStore) -> None:
    stored = {p.id: p for p in faq.points("faq")}
    original = {p.id: p for p in make_points(FAQ)}
    assert stored.keys() == original.keys()
    for key, point in original.items():
        got = stored[key]
        assert got.payload == point.payload
        assert got.dense == pytest.approx(point.dense, abs=1e-5)
        assert dict(zip(got.sparse.indices, got.sparse.values, strict=True)) == pytest.approx(
            dict(zip(point.sparse.indices, point.sparse.values, strict=True))
        )
    payloads = sorted(faq.payloads("faq"), key=lambda p: str(p.get("source_id")))
    assert payloads == sorted(
        (p.payload for p in original.values()), key=lambda p: str(p.get("source_id"))
    )


def test_republish_replaces_everything(faq: VectorStore) -> None:
    new = {"pw": FAQ["pw"], "new": "Do you ship to Mars?"}
    faq.publish("faq", make_points(new), info("s2"))
    got = faq.kb_info("faq")
    assert got is not None and (got.snapshot_id, got.count) == ("s2", 2)
    assert {p.id for p in faq.points("faq")} == {pid("pw"), pid("new")}
    assert faq.find_by_field("faq", "source_id", "bill") == []
    assert ids(faq.search("faq", vec("new"), encode_query("mars"), limit=5))[0] == pid("new")


def test_failed_publish_keeps_old_snapshot(faq: VectorStore) -> None:
    def broken() -> Iterator[Point]:
        yield from make_points({"x": "partial"})
        raise RuntimeError("source file went away")

    with pytest.raises(RuntimeError, match="went away"):
        faq.publish("faq", broken(), info("s2"))
    bad_dim = Point(pid("y"), [1.0, 0.0], SparseVector([], []), {})
    with pytest.raises(ValueError, match="dims"):
        faq.publish("faq", [bad_dim], info("s3"))
    got = faq.kb_info("faq")
    assert got is not None and got.snapshot_id == "s1"
    assert ids(faq.search("faq", near("pw"), None, limit=1)) == [pid("pw")]
    assert len(list(faq.points("faq"))) == len(FAQ)


def test_missing_kb(store: VectorStore) -> None:
    with pytest.raises(IndexUnavailable, match="'nope' not found"):
        store.search("nope", vec("pw"), None, limit=3)
    with pytest.raises(IndexUnavailable, match="not found"):
        store.find_by_field("nope", "source_id", "pw")
    with pytest.raises(IndexUnavailable, match="not found"):
        list(store.points("nope"))
    with pytest.raises(IndexUnavailable, match="not found"):
        list(store.payloads("nope"))
    assert store.list_kbs() == []


def test_drop(faq: VectorStore) -> None:
    faq.drop("faq")
    assert faq.list_kbs() == []
    assert faq.kb_info("faq") is None
    with pytest.raises(IndexUnavailable):
        faq.search("faq", vec("pw"), None, limit=1)
    faq.drop("faq")  # dropping what is gone is fine
    faq.publish("faq", make_points(FAQ), info("s9"))
    assert faq.list_kbs() == ["faq"]


@pytest.mark.slow
def test_concurrent_searches_during_republish(faq: VectorStore) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()

    def query(_: int) -> None:
        try:
            hits = faq.search("faq", near("pw"), encode_query("password"), limit=3)
            assert ids(hits)[0] == pid("pw")
        except BaseException as exc:
            errors.append(exc)

    def republish() -> None:
        for i in range(3):
            faq.publish("faq", make_points(FAQ), info(f"r{i}"))
        stop.set()

    writer = threading.Thread(target=republish)
    writer.start()
    with ThreadPoolExecutor(8) as pool:
        while not stop.is_set():
            list(pool.map(query, range(16)))
    writer.join()
    assert errors == []
    got = faq.kb_info("faq")
    assert got is not None and got.snapshot_id == "r2"


# -- embedded only -----------------------------------------------------------------------------


def shard_dirs(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / "kbs" / "faq" / SHARDS).iterdir())


@pytest.mark.slow
def test_edge_searches_int8_copies_and_returns_float_scores(tmp_path: Path) -> None:
    """Past the engine's full-scan threshold the dense lists are searched over int8 copies of
    the vectors; the candidates are rescored in float, so the hits' cosines are the exact ones
    (without the rescoring the engine's scores are off by ~1e-3)."""
    import numpy as np
    import qdrant_edge as qe

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(8000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    points = [
        Point(
            id=str(uuid.UUID(int=i + 1)), dense=v.tolist(), sparse=SparseVector([], []), payload={}
        )
        for i, v in enumerate(vectors)
    ]
    store = EdgeStore(tmp_path)
    store.publish("big", points, KBInfo("big", "s1", len(points), 384))
    query = vectors[7] + rng.normal(size=384).astype(np.float32) * 0.02
    cosines = vectors @ (query / np.linalg.norm(query))
    hits = store.search("big", query.tolist(), None, limit=8, mode="dense")
    store.close()
    assert hits[0].id == str(uuid.UUID(int=8)) and len(hits) == 8
    assert max(abs(h.dense - cosines[uuid.UUID(h.id).int - 1]) for h in hits) < 1e-6

    shard = qe.EdgeShard.load(str(next((tmp_path / "kbs" / "big" / SHARDS).iterdir())))
    unrescored = qe.QuantizationSearchParams(rescore=False)
    raw = shard.query(
        qe.QueryRequest(
            limit=8,
            query=qe.Query.Nearest(c.unit(query.tolist()), using=c.DENSE),
            params=qe.SearchParams(quantization=unrescored),
        )
    )
    shard.close()
    assert max(abs(p.score - cosines[uuid.UUID(str(p.id)).int - 1]) for p in raw) > 1e-4  # int8


def test_edge_reader_sees_other_instances_publish(tmp_path: Path) -> None:
    writer, reader = EdgeStore(tmp_path), EdgeStore(tmp_path)
    writer.publish("faq", make_points(FAQ), info("s1"))
    assert ids(reader.search("faq", near("bill"), None, limit=1)) == [pid("bill")]
    writer.publish("faq", make_points({"new": "Do you ship to Mars?"}), info("s2"))
    assert len(shard_dirs(tmp_path)) == 2  # the reader still holds s1's shard
    got = reader.kb_info("faq")
    assert got is not None and got.snapshot_id == "s2"
    assert ids(reader.search("faq", near("bill"), None, limit=5)) == [pid("new")]
    assert len(shard_dirs(tmp_path)) == 1  # let go of by the reader, so removed
    writer.close()
    reader.close()


_HOLDER = """
import sys
from pathlib import Path
from guardrag.core.store.edge import EdgeStore
store = EdgeStore(Path(sys.argv[1]))
store.find_by_field("faq", "source_id", "pw")
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
def test_edge_shard_held_by_another_process(tmp_path: Path) -> None:
    EdgeStore(tmp_path).publish("faq", make_points(FAQ), info("s1"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        store = EdgeStore(tmp_path)
        with pytest.raises(IndexUnavailable, match="locked by another guardrag process"):
            store.search("faq", vec("pw"), None, limit=1)
        # Publishing still works (new shard); the old one stays while the other process has it.
        store.publish("faq", make_points(FAQ), info("s2"))
        assert ids(store.search("faq", near("pw"), None, limit=1)) == [pid("pw")]
        assert len(shard_dirs(tmp_path)) == 2
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
    store.publish("faq", make_points(FAQ), info("s3"))
    assert len(shard_dirs(tmp_path)) == 1
    store.close()


@pytest.mark.slow
def test_edge_publish_waits_for_a_briefly_held_lock(tmp_path: Path) -> None:
    """A reader sweeping replaced shards holds the publish lock for milliseconds: an ingest that
    starts then waits instead of failing as 'locked' (seen under concurrent HTTP load)."""
    store = EdgeStore(tmp_path)
    store.publish("faq", make_points(FAQ), info("s1"))
    fd = os.open(tmp_path / "kbs" / "faq" / PUBLISH_LOCK, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    threading.Timer(0.3, os.close, args=(fd,)).start()  # the sweep ends after 0.3 s
    store.publish("faq", make_points(FAQ), info("s2"))
    got = store.kb_info("faq")
    assert got is not None and got.snapshot_id == "s2"
    store.close()


@pytest.mark.slow
def test_edge_concurrent_publish_is_refused(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path)
    store.publish("faq", make_points(FAQ), info("s1"))
    fd = os.open(tmp_path / "kbs" / "faq" / PUBLISH_LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(IndexUnavailable, match="locked: another guardrag process"):
            store.publish("faq", make_points(FAQ), info("s2"))
    finally:
        os.close(fd)
    got = store.kb_info("faq")
    assert got is not None and got.snapshot_id == "s1"
    assert len(shard_dirs(tmp_path)) == 1
    store.close()


def test_edge_corrupt_shard_and_pointer(tmp_path: Path) -> None:
    EdgeStore(tmp_path).publish("faq", make_points(FAQ), info("s1"))
    (live,) = shard_dirs(tmp_path)
    (tmp_path / "kbs" / "faq" / SHARDS / live / "edge_config.json").write_text("{oops")
    with pytest.raises(IndexUnavailable, match="corrupt"):
        EdgeStore(tmp_path).search("faq", vec("pw"), None, limit=1)
    (tmp_path / "kbs" / "faq" / POINTER).write_text("not json")
    with pytest.raises(IndexUnavailable, match="unreadable"):
        EdgeStore(tmp_path).kb_info("faq")


# -- server only -------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_server_unreachable_names_url_not_key() -> None:
    store = ServerStore(url="http://user:hunter2@127.0.0.1:9", api_key="sekret-key", timeout=2)
    with pytest.raises(IndexUnavailable) as caught:
        store.search("faq", vec("pw"), None, limit=1)
    message = str(caught.value)
    assert "http://127.0.0.1:9" in message
    assert "sekret-key" not in message and "hunter2" not in message
    store.close()


def test_server_leaves_one_collection_per_kb() -> None:
    store = ServerStore(location=":memory:")
    store.publish("faq", make_points(FAQ), info("s1"))
    store.publish("faq", make_points(FAQ), info("s2"))
    with pytest.raises(RuntimeError):
        store.publish("faq", iter_then_fail(), info("s3"))
    assert len(collections(store)) == 1
    store.publish("faq__b", make_points(FAQ), info("s1"))  # a name that extends "faq"
    store.drop("faq")
    assert store.list_kbs() == ["faq__b"]
    assert [n.startswith("guardrag_faq__b__") for n in collections(store)] == [True]
    store.close()


def collections(store: ServerStore) -> list[str]:
    return [col.name for col in store._client.get_collections().collections]


def iter_then_fail() -> Iterator[Point]:
    yield make_points(FAQ)[0]
    raise RuntimeError("boom")


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_open_store_picks_adapter(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path, None, None), EdgeStore)
    assert isinstance(open_store(tmp_path, "http://127.0.0.1:9", "k"), ServerStore)
