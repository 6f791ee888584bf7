"""Document ingest speed: pages/s and chunks/s from file to published snapshot, and its parts.

    python scripts/bench_documents.py [--pages 300] [--files FILE ...] [--repeat N]

Sources: the NG12 guideline PDF under ../shared/data/docs/ng12/ when it is there, a PDF of
`--pages` pages with repeated headings that the script writes itself (tests/documents.py), and
any `--files`. Each is ingested into an empty Qdrant Edge KB with the real embedder, as
`guardrag ingest` does, in a fresh process per run. Printed per source: pages, chunks, seconds
(wall and CPU), pages/s and chunks/s against the 10 pages/s budget, and how the time splits:
reading and chunking, the ingest screen (kb/quarantine.py: rules, invariants and the sentence
embeddings of the foreign-sentence detector), embedding and publishing the points, the rest
(calibration, statistics; reading and chunking
again inside ingest is in "rest"). The machine's load is printed with it: other work on the cores
slows every number.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from _bench import REPO, TimedEmbedder, cpu_seconds, in_fresh_process, load_average, machine

sys.path.insert(0, str(REPO))

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb import ingest as ingest_module
from guardrag.core.kb.readers import load_entries
from guardrag.core.store.edge import EdgeStore
from tests.documents import long_pdf

BUDGET_PAGES_PER_S = 10.0
T = TypeVar("T")
NG12 = REPO.parent / "shared/data/docs/ng12/NG12_suspected_cancer_recognition_and_referral.pdf"


@dataclass
class Run:
    name: str
    pages: int
    chunks: int
    wall: float
    cpu: float
    read: float
    screen: float
    publish: float
    load: str

    def line(self) -> str:
        rest = self.wall - self.read - self.screen - self.publish
        return (
            f"{self.name:<28} {self.pages:>4} pages {self.chunks:>4} chunks  {self.wall:6.1f} s "
            f"(cpu {self.cpu:5.1f} s)  {self.pages / self.wall:6.1f} pages/s "
            f"{self.chunks / self.wall:6.1f} chunks/s | read+chunk {self.read:4.1f} s, screen "
            f"{self.screen:5.1f} s ({self.screen / self.wall:4.0%}), embed+publish "
            f"{self.publish:5.1f} s, rest {rest:4.1f} s | load {self.load}"
        )


def _pages(path: Path) -> int:
    import pypdfium2 as pdfium

    if path.suffix.lower() != ".pdf":
        return 0
    document = pdfium.PdfDocument(str(path))
    try:
        return len(document)
    finally:
        document.close()


def _timed(function: Callable[..., T], spent: dict[str, float], key: str) -> Callable[..., T]:
    def wrapper(*args: Any, **kwargs: Any) -> T:
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - began

    return wrapper


def measure(name: str, path: Path) -> Run:
    """One ingest of `path` into an empty KB, timed in parts; runs in its own process."""
    embedder = TimedEmbedder(OnnxEmbedder())
    embedder.embed(["warm up the model"])
    start = time.perf_counter()
    chunks = len(load_entries([path])[0])
    read = time.perf_counter() - start
    spent: dict[str, float] = {}
    ingest_module.quarantine = _timed(ingest_module.quarantine, spent, "screen")
    with tempfile.TemporaryDirectory() as tmp:
        store = EdgeStore(Path(tmp) / "data")
        store.publish = _timed(store.publish, spent, "publish")  # type: ignore[method-assign]
        cpu0, start = cpu_seconds(), time.perf_counter()
        ingest_module.ingest(store, embedder, "bench", [path])
        wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
        store.close()
    return Run(
        name, _pages(path), chunks, wall, cpu, read, spent["screen"], spent["publish"],
        load_average(),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--files", type=Path, nargs="*", default=[])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(machine())
    print(f"budget: {BUDGET_PAGES_PER_S:.0f} pages/s on 2 cores")
    with tempfile.TemporaryDirectory() as tmp:
        sources = [(p.name, p) for p in args.files]
        if NG12.is_file():
            sources.insert(0, ("NG12 guideline (PDF)", NG12))
        generated = long_pdf(Path(tmp) / "report.pdf", pages=args.pages)
        sources.append((f"generated {args.pages}-page PDF", generated))
        for name, path in sources:
            runs = [in_fresh_process(measure, name, path) for _ in range(args.repeat)]
            for run in runs:
                print(run.line())
            if len(runs) > 1:
                rate = statistics.median(r.pages / r.wall for r in runs)
                print(f"{name}: median {rate:.1f} pages/s over {len(runs)} runs")


if __name__ == "__main__":
    main()
