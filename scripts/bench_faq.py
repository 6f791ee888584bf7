"""End-to-end latency per route without the LLM, and of the guard stack, on embedded Qdrant Edge.

    python scripts/bench_faq.py [--rounds 5] [--kb-file FAQ --golden CASES --kb NAME]

Ingests the KB, then asks every golden case through the real pipeline with the LLM switched
off, after a warm-up, `--rounds` times. Groups the results by how each question ended:
exact_match and semantic_match (answered from the FAQ; those the second opinion settled
apart: they pay for its model), refused at moderate_input (a guard
blocked it), refused out_of_domain (classify), and the rest: rerank refusals, which with
the LLM off include every question no FAQ entry fits (scripts/bench_llm.py measures those
with generation).
Prints p50/p95 per route against the 20 ms budget, the guard stack (moderate_input +
moderate_output per answered question; moderate_input embeds the question once for every
later stage, so that embedding is shown apart) against the 10 ms budget, and per-node medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from _bench import (
    BUDGET_FAQ_MS,
    BUDGET_GUARDS_MS,
    REPO,
    SAMPLE_FAQ,
    TimedEmbedder,
    machine,
    ratio,
    summary,
)

from guardrag.config.settings import Settings, load_settings
from guardrag.contract import Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import IngestReport, ingest
from guardrag.core.store import open_store
from guardrag.faces.eval.evaluate import Case, load_cases
from guardrag.faces.service import Guardrag, build_services

GUARD_NODES = ("moderate_input", "moderate_output")


def route_of(result: Result) -> str:
    """The route a result took, with refusals named by where they happened; a verbatim answer
    the second opinion settled is its own route (it pays for the second embedder)."""
    if result.refusal is None:
        if any(d.node == "rerank" and "second opinion" in d.reason for d in result.trail):
            return "semantic_match, second opinion"
        return result.route or "answered"
    reason, stage = result.refusal.reason.value, result.refusal.stage
    if stage == "moderate_input":
        return "refused at moderate_input"
    return f"refused {reason} ({stage})"


@dataclass
class FaqRun:
    """One bench_faq run: latencies by route and node, the guard stack and its embedding."""

    cases: list[Case]
    report: IngestReport
    ingest_s: float
    cold_s: float
    by_route: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_node: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    guards: list[float] = field(default_factory=list)
    embeds: list[float] = field(default_factory=list)

    def answered(self) -> list[float]:
        """Latencies of the questions answered from the FAQ (exact and semantic matches)."""
        return [ms for route in ("exact_match", "semantic_match") for ms in self.by_route[route]]


def measure(kb_file: Path, golden: Path, kb: str, rounds: int) -> FaqRun:
    """Ingest `kb_file`, then ask every golden case `rounds` times after a warm-up, LLM off."""
    cases = load_cases(golden)
    with tempfile.TemporaryDirectory() as tmp:
        installed = load_settings()  # the second opinion, where `make llm` put it
        settings = Settings(
            data_dir=Path(tmp),
            default_kb=kb,
            llm_local=False,
            llm_model_dir=installed.models_dir,
        )
        store, embedder = open_store(Path(tmp)), TimedEmbedder(OnnxEmbedder())
        started = time.perf_counter()
        report = ingest(store, embedder, kb, [kb_file])
        ingest_s = time.perf_counter() - started
        cold = time.perf_counter()
        bot = Guardrag(
            build_services(settings, store=store, embedder=embedder, chat_model=None), settings
        )
        run = FaqRun(cases, report, ingest_s, time.perf_counter() - cold)
        knobs = {"use_llm": False}
        for case in cases[:20]:
            bot.ask(case.question, knobs=knobs)  # warm-up
        for _ in range(rounds):
            for case in cases:
                embedder.reset()
                result = bot.ask(case.question, knobs=knobs)
                run.by_route[route_of(result)].append(result.latency_ms)
                for decision in result.trail:
                    run.by_node[decision.node].append(decision.ms)
                if result.outcome == "answered":
                    run.guards.append(sum(d.ms for d in result.trail if d.node in GUARD_NODES))
                    run.embeds.append(sum(embedder.calls_ms))
        bot.close()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kb-file", type=Path, default=SAMPLE_FAQ)
    parser.add_argument("--golden", type=Path, default=REPO / "datasets/ewallet/golden.jsonl")
    parser.add_argument("--kb", default="kinetic")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be positive")
    for path in (args.kb_file, args.golden):
        if not path.is_file():
            parser.error(f"{path}: no such file")
    print(machine())
    run = measure(args.kb_file, args.golden, args.kb, args.rounds)
    by_route, by_node, guards, embeds = run.by_route, run.by_node, run.guards, run.embeds
    cases, report, ingest_s, cold_s = run.cases, run.report, run.ingest_s, run.cold_s
    print(
        f"ingest: {report.total} entries in {ingest_s:.2f} s ({report.total / ingest_s:.0f}/s); "
        f"services cold start {cold_s:.2f} s; {len(cases)} cases x {args.rounds} rounds"
    )
    answered = run.answered()
    if answered:
        p50 = statistics.median(answered)
        print(
            f"FAQ-answered (no LLM)        {summary(answered)}  "
            f"{ratio(p50, BUDGET_FAQ_MS, 'budget')} ({BUDGET_FAQ_MS:.0f} ms)"
        )
    for route, values in sorted(by_route.items()):
        print(f"  {route:<42} {summary(values)}")
    if guards:
        without = [g - e for g, e in zip(guards, embeds, strict=True)]
        print(
            f"guard stack, answered questions {summary(guards)}  "
            f"{ratio(statistics.median(guards), BUDGET_GUARDS_MS, 'budget')} "
            f"({BUDGET_GUARDS_MS:.0f} ms)"
        )
        print(f"  of which the question's embedding {summary(embeds)}")
        print(f"  guards without the embedding      {summary(without)}")
    print("per node median ms:")
    for node, values in by_node.items():
        print(f"  {node:<16} {statistics.median(values):6.2f}")


if __name__ == "__main__":
    main()
