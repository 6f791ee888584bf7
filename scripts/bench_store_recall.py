"""What HNSW's search width costs and buys at 100k points, on real MiniLM vectors.

    python scripts/bench_store_recall.py build DIR [--points 100000] [--m 16 --ef-construct 100] [--float]
    python scripts/bench_store_recall.py measure DIR [--ef 64 100 128 200]

`build` publishes one Edge store: the sample KB's 158 entries (ingested as `guardrag ingest`
does: their own title, content and BM25 vectors) among N distractors whose title vectors embed
the synthetic FAQ questions of scripts/_bench.py (content vectors: another row's question;
BM25 of question + answer). Random vectors (scripts/bench_store.py) time the engine but have no
neighbourhoods to find; these do. `measure` asks the golden questions that expect a KB entry
and fuses the three lists as EdgeStore.search does (prefetch 40, RRF), once with an exact
search (the truth) and once per ef, and prints recall@1 / recall@8 of the expected entry, how
often the fused top 8 equals the exact one, the overlap of each dense list with the exact list,
and the engine's CPU milliseconds per query.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import qdrant_edge as qe
from _bench import REPO, SAMPLE_FAQ, machine, synthetic_faq

from guardrag.core.embedder import DIM, load_embedder
from guardrag.core.kb.entries import Entry
from guardrag.core.kb.ingest import ingest, point_id
from guardrag.core.store import KBInfo, Point, bm25, edge
from guardrag.core.store import _common as c
from guardrag.core.store.edge import EdgeStore

KB = "bench"
SAMPLE_KB = "kinetic"
GOLDEN = REPO / "datasets" / "ewallet" / "golden.jsonl"
PREFETCH = c.prefetch_limit(8)
FLOAT_ONLY = "float-only"  # the marker `build --float` leaves in its folder


def sample_points() -> list[Point]:
    """The sample KB's points, as an ingest stores them."""
    with tempfile.TemporaryDirectory() as tmp:
        store = EdgeStore(Path(tmp))
        ingest(store, load_embedder(), SAMPLE_KB, [SAMPLE_FAQ])
        points = list(store.points(SAMPLE_KB))
        store.close()
    return points


def distractors(size: int, seed: int = 31) -> Iterator[Point]:
    rows = synthetic_faq(size, seed)
    embedder = load_embedder()
    started = time.perf_counter()
    titles = np.concatenate(
        [embedder.embed([r["question"] for r in rows[i : i + 2000]]) for i in range(0, size, 2000)]
    )
    print(
        f"embedded {size} distractor questions in {time.perf_counter() - started:.0f} s", flush=True
    )
    bodies = titles[np.random.default_rng(seed).permutation(size)]
    for start in range(0, size, 1000):
        part = rows[start : start + 1000]
        sparse = bm25.encode_documents([f"{r['question']}\n{r['answer']}" for r in part])
        for offset, (row, terms) in enumerate(zip(part, sparse, strict=True)):
            i = start + offset
            entry = Entry("faq", row["id"], row["question"], row["answer"], "synthetic", row["id"])
            yield Point(
                point_id(KB, row["id"]),
                titles[i].tolist(),
                terms,
                entry.payload(),
                bodies[i].tolist(),
            )


def build(folder: Path, size: int, m: int, ef_construct: int, float_only: bool) -> None:
    """EdgeStore's own shard config (int8 copies included), or `float_only`: without the
    int8 copies, as stores were before them; `m` / `ef_construct` other than the engine's."""
    if (m, ef_construct, float_only) != (16, 100, False):
        default = edge._config
        hnsw = qe.HnswIndexConfig(m=m, ef_construct=ef_construct, full_scan_threshold=10_000)

        def config(dim: int) -> qe.EdgeConfig:
            base = default(dim)
            return qe.EdgeConfig(
                vectors=base.vectors,
                sparse_vectors=base.sparse_vectors,
                hnsw_config=hnsw,
                quantization_config=None if float_only else base.quantization_config,
            )

        edge._config = config  # this process only builds the store
    points = sample_points()
    store = EdgeStore(folder)
    started = time.perf_counter()

    def everything() -> Iterator[Point]:
        yield from points
        yield from distractors(size)

    store.publish(KB, everything(), KBInfo(KB, f"recall{size}", 0, DIM))
    store.close()
    if float_only:
        (folder / FLOAT_ONLY).write_text("built without int8 copies of the vectors\n")
    print(f"published {size} + {len(points)} points in {time.perf_counter() - started:.0f} s")


def fused(
    shard: qe.EdgeShard, vector: list[float], question: str, params: qe.SearchParams | None
) -> tuple[list[str], list[list[str]]]:
    """The fused top 8 and the two dense lists, as EdgeStore.search builds them."""
    query, terms = c.unit(vector), bm25.encode_query(question)
    lists = [qe.Query.Nearest(query, using=name) for name in (c.DENSE, c.CONTENT)]
    if terms.indices:
        lists.append(qe.Query.Nearest(qe.SparseVector(terms.indices, terms.values), using=c.SPARSE))
    found = shard.query_batch(
        qe.QueryBatchRequest(
            [qe.QueryRequest(limit=PREFETCH, query=q, params=params) for q in lists]
        )
    )
    top = [str(pid) for pid, _ in c.rrf(([p.id for p in f] for f in found), 8)]
    return top, [[str(p.id) for p in f] for f in found[:2]]


def search_settings(widths: list[int], quantized: bool) -> dict[str, qe.SearchParams | None]:
    """Exact, the engine's default and each width; on an int8 store each width also over the
    int8 copies with the candidates rescored in float (oversampling 1 and 2)."""
    ignore = qe.QuantizationSearchParams(ignore=True) if quantized else None
    settings: dict[str, qe.SearchParams | None] = {
        "exact": qe.SearchParams(exact=True, quantization=ignore),
        "default": qe.SearchParams(quantization=ignore) if quantized else None,
    }
    settings.update({f"ef {w}": qe.SearchParams(hnsw_ef=w, quantization=ignore) for w in widths})
    for w in widths if quantized else ():
        for over in (1.0, 2.0):
            rescored = qe.QuantizationSearchParams(rescore=True, oversampling=over)
            settings[f"int8 ef {w} x{over:g}"] = qe.SearchParams(hnsw_ef=w, quantization=rescored)
    return settings


def measure(folder: Path, widths: list[int]) -> None:
    shard_dir = next((folder / "kbs" / KB / edge.SHARDS).iterdir())
    shard = qe.EdgeShard.load(str(shard_dir))
    cases = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
    cases = [case for case in cases if case.get("expected_source_id")]
    vectors = load_embedder().embed([case["question"] for case in cases]).tolist()
    quantized = not (folder / FLOAT_ONLY).exists()
    print(f"{shard.info().points_count} points; {len(cases)} golden questions expecting an entry")
    settings = search_settings(widths, quantized)
    truth = [
        fused(shard, v, case["question"], settings["exact"])
        for case, v in zip(cases, vectors, strict=True)
    ]
    for name, params in settings.items():
        first = within = same = 0
        overlap: list[float] = []
        started = time.process_time()
        for case, vector, (exact_top, exact_lists) in zip(cases, vectors, truth, strict=True):
            top, lists = fused(shard, vector, case["question"], params)
            want = point_id(SAMPLE_KB, case["expected_source_id"])
            first += top[0] == want
            within += want in top
            same += top == exact_top
            overlap += [
                len(set(a) & set(b)) / PREFETCH for a, b in zip(lists, exact_lists, strict=True)
            ]
        cpu = (time.process_time() - started) / len(cases) * 1000
        n = len(cases)
        print(
            f"{name:>8}  recall@1 {first / n:.4f}  recall@8 {within / n:.4f}  "
            f"top 8 = exact {same}/{n}  dense lists' overlap with exact {np.mean(overlap):.4f}  "
            f"{cpu:.2f} CPU-ms/query"
        )
    shard.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("build", "measure"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=16, help="HNSW edges per node (engine: 16)")
    parser.add_argument("--ef-construct", type=int, default=100, help="engine default: 100")
    parser.add_argument("--float", action="store_true", help="build without the int8 copies")
    parser.add_argument("--ef", type=int, nargs="+", default=[64, 100, 128, 200, 300])
    args = parser.parse_args()
    print(machine())
    if args.what == "build":
        build(args.folder, args.points, args.m, args.ef_construct, args.float)
    else:
        measure(args.folder, args.ef)


if __name__ == "__main__":
    main()
