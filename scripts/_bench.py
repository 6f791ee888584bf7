"""What every benchmark script shares: timing, percentiles, memory, the machine line, budgets,
and synthetic FAQ rows shaped like the sample KB.

Benchmarks are scripts, not tests: they print medians and p95 and compare them with a baseline
(a budget from ARCHITECTURE.md section 4, or the other adapter), never assert on them.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import resource
import statistics
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np

    from guardrag.core.embedder import OnnxEmbedder

REPO = Path(__file__).resolve().parents[1]
SAMPLE_FAQ = REPO / "datasets" / "ewallet" / "faq.jsonl"

# ARCHITECTURE.md section 4 and issue #17 (2-core CPU, default stack).
BUDGET_GUARDS_MS = 10.0
BUDGET_FAQ_MS = 20.0
BUDGET_FAQ_P95_MS = 30.0
BUDGET_INGEST_PER_S = 300.0
BUDGET_CHUNKS_PER_S = 200.0
BUDGET_HYBRID_100K_MS = 3.0
BUDGET_HELP_S = 0.5
BUDGET_ASK_S = 1.5
BUDGET_INGEST_SAMPLE_S = 1.5

T = TypeVar("T")


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank quantile (q in 0..1) of the values; 0.0 for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def summary(values: list[float], unit: str = "ms") -> str:
    """'n=.. p50 .. p95 ..' for a list of samples."""
    if not values:
        return "n=0"
    return (
        f"n={len(values):<5} p50 {statistics.median(values):8.2f} {unit}  "
        f"p95 {percentile(values, 0.95):8.2f} {unit}"
    )


def ratio(value: float, baseline: float, name: str) -> str:
    """'0.42x budget': value / baseline (for a rate, below 1 misses the budget; for a time,
    above 1 does)."""
    return f"{value / baseline:5.2f}x {name}" if baseline else f"n/a {name}"


def time_ms(call: Callable[[], object], repeat: int, warmup: int = 1) -> list[float]:
    """Wall time of `call` in milliseconds, `repeat` times after `warmup` untimed calls."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """CPU time this process has used (all threads, user + system): on a machine shared with
    other work it moves far less than wall time does."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def in_fresh_process(function: Callable[..., T], *args: Any) -> T:
    """Run `function(*args)` in a new interpreter, so its peak memory is its own."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def cpu_model() -> str:
    """The CPU's name (/proc/cpuinfo on Linux): figures from different CPUs do not compare."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def machine() -> str:
    """The state the numbers were taken in: CPU, cores, load, versions."""
    import onnxruntime  # lazy: only benchmarks that embed print its version

    return (
        f"machine: {cpu_model()}, {os.cpu_count()} cores, load average {load_average()} "
        f"(1/5/15 min), Python {platform.python_version()}, onnxruntime {onnxruntime.__version__}"
    )


class TimedEmbedder:
    """The real embedder, recording each call's milliseconds and the texts it embedded."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner, self.dim = inner, inner.dim
        self.calls_ms: list[float] = []
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        start = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.calls_ms.append((time.perf_counter() - start) * 1000)
            self.texts += len(texts)

    def reset(self) -> None:
        self.calls_ms, self.texts = [], 0


def synthetic_faq(count: int, seed: int = 7, sample: Path = SAMPLE_FAQ) -> list[dict[str, str]]:
    """`count` distinct FAQ rows drawn from the sample KB's words and question/answer lengths.

    Every text is unique, so no cache or de-duplication flatters the numbers.
    """
    rows = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    vocabulary = sorted({w for r in rows for w in re.findall(r"[A-Za-z]+", r["answer"])})
    q_lengths = [len(r["question"].split()) for r in rows]
    a_lengths = [len(r["answer"].split()) for r in rows]
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(n))

    return [
        {
            "id": f"syn-{i}",
            "question": f"{words(rng.choice(q_lengths))} {i}?",
            "answer": f"{words(rng.choice(a_lengths))} (ref {i}).",
        }
        for i in range(count)
    ]


def synthetic_documents(folder: Path, sections: int = 160, seed: int = 5) -> list[Path]:
    """Markdown files of `sections` sections under headings two levels deep, each three
    FAQ-sized paragraphs (~100-150 words: one or two chunks)."""
    rows = synthetic_faq(sections * 4, seed)
    files = []
    for number in range(8):
        lines = [f"# Handbook {number}", ""]
        for section in range(number, sections, 8):
            lines += [f"## Part {section // 40}", f"### {rows[4 * section]['question']}", ""]
            lines += [rows[4 * section + k]["answer"] + "\n" for k in range(1, 4)]
        path = folder / f"handbook_{number}.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        files.append(path)
    return files


def write_jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
