"""Ingest throughput and peak memory: synthetic FAQ entries through `guardrag.core.kb.ingest`.

    python scripts/bench_ingest.py [--sizes 1000 10000 100000] [--store edge|client] [--profile]

Each size runs in a fresh process (so its peak RSS is its own): synthetic rows shaped like the
sample KB (scripts/_bench.py) are written to JSONL and ingested into an empty KB, question and
answer vectors plus BM25, exactly as `guardrag ingest` does. The sample KB itself runs first as
a reference. Prints entries/s against the 300/s budget, the share of time spent embedding, the
first question's KB statistics pass (kb_stats), and peak RSS with the model loaded vs after.
--profile adds the functions ingest spent its time in (cProfile, by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _bench import (
    BUDGET_INGEST_PER_S,
    SAMPLE_FAQ,
    TimedEmbedder,
    cpu_seconds,
    in_fresh_process,
    machine,
    peak_rss_mb,
    ratio,
    synthetic_faq,
    write_jsonl,
)

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.kb.stats import KBStats, point_text
from guardrag.core.store import VectorStore
from guardrag.core.store.edge import EdgeStore
from guardrag.core.store.server import ServerStore

KB = "bench"


@dataclass
class Run:
    label: str
    entries: int
    seconds: float
    cpu_seconds: float
    embed_seconds: float
    texts: int
    stats_seconds: float
    rss_model_mb: float
    rss_peak_mb: float

    def line(self) -> str:
        rate = self.entries / self.seconds
        return (
            f"{self.label:>7} {self.entries:>7} {self.seconds:8.1f} s {rate:7.0f}/s  "
            f"{ratio(rate, BUDGET_INGEST_PER_S, 'budget'):>13}  "
            f"cpu {self.cpu_seconds:7.1f} s ({self.entries / self.cpu_seconds:4.0f} entries/cpu-s)  "
            f"embed {self.embed_seconds / self.seconds:4.0%} "
            f"({self.texts / self.embed_seconds:5.0f} texts/s)  stats {self.stats_seconds:5.2f} s  "
            f"RSS {self.rss_model_mb:5.0f} -> {self.rss_peak_mb:5.0f} MB"
        )


def open_bench_store(kind: str, data_dir: Path) -> VectorStore:
    return EdgeStore(data_dir) if kind == "edge" else ServerStore(location=":memory:")


def measure(size: int, store_kind: str, profile: bool) -> Run:
    """Ingest `size` synthetic rows (0: the sample KB) into a new store; runs in its own process."""
    with tempfile.TemporaryDirectory() as tmp:
        source = write_jsonl(Path(tmp) / "faq.jsonl", synthetic_faq(size)) if size else SAMPLE_FAQ
        embedder = TimedEmbedder(OnnxEmbedder())
        embedder.embed(["warm up"])
        embedder.reset()
        rss_model = peak_rss_mb()
        store = open_bench_store(store_kind, Path(tmp) / "data")
        profiler = cProfile.Profile() if profile else None
        start, cpu_start = time.perf_counter(), cpu_seconds()
        if profiler:
            profiler.enable()
        report = ingest(store, embedder, KB, [source])
        if profiler:
            profiler.disable()
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
        # What the first question after a publish pays: classify and rerank need these.
        stats_start = time.perf_counter()
        KBStats.from_texts(report.snapshot_id, (point_text(p.payload) for p in store.points(KB)))
        stats_seconds = time.perf_counter() - stats_start
        store.close()
    if profiler:
        print(f"-- profile, {report.total} entries (top functions by own time)")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    return Run(
        "sample" if not size else "synth",
        report.total,
        seconds,
        cpu,
        sum(embedder.calls_ms) / 1000,
        embedder.texts,
        stats_seconds,
        rss_model,
        peak_rss_mb(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--store", choices=["edge", "client"], default="edge")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if any(size < 1 for size in args.sizes):
        parser.error("--sizes must be positive")
    print(machine())
    print(f"store: {args.store}; budget {BUDGET_INGEST_PER_S:.0f} entries/s")
    print(f"{'source':>7} {'entries':>7} {'wall':>10} {'rate':>9}")
    for size in [0, *args.sizes]:
        print(in_fresh_process(measure, size, args.store, args.profile).line(), flush=True)


if __name__ == "__main__":
    main()
