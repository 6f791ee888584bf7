"""Ingest throughput and peak memory: synthetic FAQ entries through `guardrag.core.kb.ingest`.

    python scripts/bench_ingest.py [--sizes 1000 10000 100000] [--store edge|client] [--profile]
        [--documents] [--files FILE ...] [--repeat N]

Each size runs in a fresh process (so its peak RSS is its own): synthetic rows shaped like the
sample KB (scripts/_bench.py) are written to JSONL and ingested into an empty KB, question and
answer vectors plus BM25, exactly as `guardrag ingest` does. The sample KB itself runs first as
a reference. Prints entries/s against the 300/s budget, the share of time spent embedding, the
first question's KB statistics pass (kb_stats), peak RSS with the model loaded vs after, and
for a JSONL FAQ the seconds a re-ingest takes after one answer is edited.
--profile adds the functions ingest spent its time in (cProfile, by own time).
--documents adds Markdown documents (chunk + embed + publish, in chunks/s against the 200/s
budget): the synthetic handbooks of scripts/bench_startup.py (160 sections, ~190 chunks) and
datasets/insurance_docs. --repeat runs every source N times (fresh process each) and prints the
median rate after the runs. --files ingests real KB files (one KB per file) the same way.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _bench import (
    BUDGET_CHUNKS_PER_S,
    BUDGET_INGEST_PER_S,
    REPO,
    SAMPLE_FAQ,
    TimedEmbedder,
    cpu_seconds,
    in_fresh_process,
    machine,
    peak_rss_mb,
    ratio,
    synthetic_documents,
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
INSURANCE_DOCS = REPO / "datasets" / "insurance_docs" / "documents"


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
    reingest: tuple[float, float] | None = None  # wall and CPU seconds

    @property
    def rate(self) -> float:
        return self.entries / self.seconds

    def line(self) -> str:
        budget = BUDGET_CHUNKS_PER_S if self.label in DOCUMENTS else BUDGET_INGEST_PER_S
        label = self.label[:9]
        return (
            f"{label:>9} {self.entries:>7} {self.seconds:8.1f} s {self.rate:7.0f}/s  "
            f"{ratio(self.rate, budget, 'budget'):>13}  "
            f"cpu {self.cpu_seconds:7.1f} s ({self.entries / self.cpu_seconds:4.0f} entries/cpu-s)  "
            f"embed {self.embed_seconds / self.seconds:4.0%} "
            f"({self.texts / self.embed_seconds:5.0f} texts/s)  stats {self.stats_seconds:5.2f} s  "
            f"RSS {self.rss_model_mb:5.0f} -> {self.rss_peak_mb:5.0f} MB"
            + (
                f"  re-ingest after one edit {self.reingest[0]:5.2f} s (cpu {self.reingest[1]:.2f})"
                if self.reingest
                else ""
            )
        )


def open_bench_store(kind: str, data_dir: Path) -> VectorStore:
    return EdgeStore(data_dir) if kind == "edge" else ServerStore(location=":memory:")


DOCUMENTS = ("handbook", "insurance")


def sources(label: str, size: int, folder: Path) -> list[Path]:
    """The files one run ingests: the sample KB, `size` synthetic rows, or Markdown documents."""
    if label == "handbook":
        return synthetic_documents(folder)
    if label == "insurance":
        return sorted(INSURANCE_DOCS.glob("*.md"))
    if label.startswith("file:"):
        return [Path(label.removeprefix("file:"))]
    return [write_jsonl(folder / "faq.jsonl", synthetic_faq(size)) if size else SAMPLE_FAQ]


def measure(size: int, store_kind: str, profile: bool, label: str = "") -> Run:
    """Ingest `size` synthetic rows (0: the sample KB), or the documents of `label`, into a new
    store; runs in its own process."""
    label = label or ("synth" if size else "sample")
    with tempfile.TemporaryDirectory() as tmp:
        files = sources(label, size, Path(tmp))
        if len(files) == 1 and files[0].suffix == ".jsonl":  # a copy: the re-ingest edits it
            files = [Path(shutil.copy(files[0], Path(tmp) / f"kb-{files[0].name}"))]
        embedder = TimedEmbedder(OnnxEmbedder())
        embedder.embed(["warm up"])
        embedder.reset()
        rss_model = peak_rss_mb()
        store = open_bench_store(store_kind, Path(tmp) / "data")
        profiler = cProfile.Profile() if profile else None
        start, cpu_start = time.perf_counter(), cpu_seconds()
        if profiler:
            profiler.enable()
        report = ingest(store, embedder, KB, files)
        if profiler:
            profiler.disable()
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
        # What the first question after a publish pays: classify and rerank need these.
        stats_start = time.perf_counter()
        KBStats.from_texts(report.snapshot_id, (point_text(p.payload) for p in store.points(KB)))
        stats_seconds = time.perf_counter() - stats_start
        embedded = sum(embedder.calls_ms) / 1000, embedder.texts
        reingest = (
            reingest_one_edit(store, embedder, files) if files[0].suffix == ".jsonl" else None
        )
        store.close()
    if profiler:
        print(f"-- profile, {report.total} entries (top functions by own time)")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    return Run(
        Path(label).parent.name if label.startswith("file:") else label,
        report.total,
        seconds,
        cpu,
        *embedded,
        stats_seconds,
        rss_model,
        peak_rss_mb(),
        reingest,
    )


def reingest_one_edit(
    store: VectorStore, embedder: TimedEmbedder, files: list[Path]
) -> tuple[float, float]:
    """Wall and CPU seconds to re-ingest the KB after one answer changed (what a support team
    waits for after each edit of its help centre)."""
    lines = files[0].read_text().splitlines()
    first = json.loads(lines[0])
    # The edit repeats the answer's first sentence: a sentence of its own, which the screen keeps.
    first["answer"] = f"{first['answer']} {first['answer'].split('. ')[0].rstrip('.')}."
    files[0].write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    start, cpu = time.perf_counter(), cpu_seconds()
    report = ingest(store, embedder, KB, files)
    if report.updated != 1:
        raise RuntimeError(f"the edited row was not re-ingested: {report.summary()}")
    return time.perf_counter() - start, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--store", choices=["edge", "client"], default="edge")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--documents", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--files", type=Path, nargs="*", default=[], help="real KB files")
    args = parser.parse_args()
    if any(size < 1 for size in args.sizes) or args.repeat < 1:
        parser.error("--sizes and --repeat must be positive")
    print(machine())
    print(
        f"store: {args.store}; budget {BUDGET_INGEST_PER_S:.0f} entries/s, "
        f"{BUDGET_CHUNKS_PER_S:.0f} document chunks/s"
    )
    print(f"{'source':>9} {'entries':>7} {'wall':>10} {'rate':>9}")
    plan = [(0, ""), *((size, "") for size in args.sizes)]
    if args.documents:
        plan += [(0, label) for label in DOCUMENTS]
    plan += [(0, f"file:{path.resolve()}") for path in args.files]
    rates: dict[str, list[Run]] = {}
    for _ in range(args.repeat):
        for size, label in plan:
            run = in_fresh_process(measure, size, args.store, args.profile, label)
            rates.setdefault(f"{run.label} {run.entries}", []).append(run)
            print(run.line(), flush=True)
    if args.repeat > 1:
        print(f"-- medians of {args.repeat} runs: {machine()}")
        for name, runs in rates.items():
            rate = statistics.median(r.rate for r in runs)
            per_cpu = statistics.median(r.entries / r.cpu_seconds for r in runs)
            edits = [r.reingest for r in runs if r.reingest is not None]
            again = (
                f", re-ingest after one edit {statistics.median(e[0] for e in edits):.2f} s "
                f"(cpu {statistics.median(e[1] for e in edits):.2f} s)"
                if edits
                else ""
            )
            print(f"{name:>15}: {rate:6.1f}/s, {per_cpu:6.1f} per CPU-s{again}")


if __name__ == "__main__":
    main()
