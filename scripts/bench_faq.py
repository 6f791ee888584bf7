"""Latency of questions answered from the FAQ (no LLM), end to end, on embedded Qdrant Edge.

    python scripts/bench_faq.py [--rounds 5]

Runs every answerable case of datasets/ewallet/golden.jsonl through the real pipeline with the
LLM switched off, after a warm-up, and prints p50/p95 per route and the median per node.
Budget (ARCHITECTURE.md section 4): p50 <= 20 ms end to end.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from config.settings import Settings
from guardrag.embedder import OnnxEmbedder
from guardrag.evaluate import load_cases
from guardrag.ingest import ingest
from guardrag.service import Guardrag, build_services
from guardrag.store import open_store

REPO = Path(__file__).resolve().parents[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cases = [c for c in load_cases(REPO / "datasets/ewallet/golden.jsonl") if c.expect == "answer"]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), default_kb="kinetic")
        store, embedder = open_store(Path(tmp)), OnnxEmbedder()
        started = time.perf_counter()
        report = ingest(store, embedder, "kinetic", [REPO / "datasets/ewallet/faq.jsonl"])
        ingest_s = time.perf_counter() - started
        cold = time.perf_counter()
        bot = Guardrag(
            build_services(settings, store=store, embedder=embedder, chat_model=None), settings
        )
        cold_s = time.perf_counter() - cold
        knobs = {"use_llm": False}
        for case in cases[:10]:
            bot.ask(case.question, knobs=knobs)  # warm-up
        by_route: dict[str, list[float]] = defaultdict(list)
        by_node: dict[str, list[float]] = defaultdict(list)
        for _ in range(args.rounds):
            for case in cases:
                result = bot.ask(case.question, knobs=knobs)
                by_route[
                    result.route
                    or f"refused:{result.refusal.reason.value if result.refusal else '?'}"
                ].append(result.latency_ms)
                for decision in result.trail:
                    by_node[decision.node].append(decision.ms)
        bot.close()
    print(
        f"ingest: {report.total} entries in {ingest_s:.2f} s ({report.total / ingest_s:.0f}/s); services cold start {cold_s:.2f} s"
    )
    answered = [
        ms for route, values in by_route.items() if not route.startswith("refused") for ms in values
    ]
    print(
        f"FAQ-answered (no LLM): n={len(answered)} p50 {statistics.median(answered):.1f} ms  p95 {percentile(answered, 0.95):.1f} ms  (budget p50 20 ms)"
    )
    for route, values in sorted(by_route.items()):
        print(
            f"  {route:<28} n={len(values):<5} p50 {statistics.median(values):6.1f} ms  p95 {percentile(values, 0.95):6.1f} ms"
        )
    print("per node median ms:")
    for node, values in by_node.items():
        print(f"  {node:<16} {statistics.median(values):6.2f}")


if __name__ == "__main__":
    main()
