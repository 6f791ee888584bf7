"""Where users wait: start-up, whole commands, ingest, documents, the store, the FAQ route.

    python scripts/bench_startup.py [--rounds 5] [--heavy-rounds 1] [--baseline DIR]
        [--store-dir DIR] [--only help ask ...]

Each measure runs in a fresh process (a whole command is timed from outside, interpreter start
included); with --baseline (a copy of another revision: `git archive REV | tar -x -C DIR`),
every measure also runs against that copy's package, interleaved round by round with this
tree's, so both see the same machine load. Prints the CPU and the load average, then one row
per measure: median of this tree, of the baseline, their ratio and the budget.

Measures: `guardrag --help`, `kbs`, `audit --help`; `ingest` of the 158-entry sample KB and
`ask` on an FAQ question (whole processes, fresh data dir, no LLM); ingest entries/s at 1k
synthetic rows (scripts/bench_ingest.py); document chunks/s (synthetic Markdown, sections of
several paragraphs); hybrid query latency on a prebuilt Edge store (--store-dir, made by
scripts/bench_store.py's points: `--build-store DIR --store-points 100000`); the FAQ route's
p50/p95 and the guard stack per answered question (scripts/bench_faq.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from _bench import (
    BUDGET_ASK_S,
    BUDGET_CHUNKS_PER_S,
    BUDGET_FAQ_MS,
    BUDGET_FAQ_P95_MS,
    BUDGET_GUARDS_MS,
    BUDGET_HELP_S,
    BUDGET_HYBRID_100K_MS,
    BUDGET_INGEST_PER_S,
    BUDGET_INGEST_SAMPLE_S,
    REPO,
    SAMPLE_FAQ,
    cpu_model,
    cpu_seconds,
    load_average,
    percentile,
    synthetic_documents,
)

KB = "kinetic"
QUESTION = "How do I reset my PIN?"
SCRIPTS = Path(__file__).resolve().parent

# name: (what, unit, budget, higher is better, heavy)
MEASURES: dict[str, tuple[str, str, float, bool, bool]] = {
    "help": ("guardrag --help", "s", BUDGET_HELP_S, False, False),
    "kbs": ("guardrag kbs", "s", BUDGET_HELP_S, False, False),
    "audit": ("guardrag audit --help", "s", BUDGET_HELP_S, False, False),
    "ask": ("guardrag ask (FAQ question), whole process", "s", BUDGET_ASK_S, False, False),
    "ingest": ("guardrag ingest, 158-entry sample KB", "s", BUDGET_INGEST_SAMPLE_S, False, True),
    "ingest_1k": ("ingest, 1k synthetic FAQ rows", "entries/s", BUDGET_INGEST_PER_S, True, True),
    "docs": ("documents, chunk + embed + publish", "chunks/s", BUDGET_CHUNKS_PER_S, True, True),
    "store": ("hybrid query, Edge store (--store-dir)", "ms", BUDGET_HYBRID_100K_MS, False, True),
    "faq_p50": ("FAQ-answered p50 (bench_faq)", "ms", BUDGET_FAQ_MS, False, True),
    "faq_p95": ("FAQ-answered p95 (bench_faq)", "ms", BUDGET_FAQ_P95_MS, False, True),
    "guards": ("guard stack per answered question p50", "ms", BUDGET_GUARDS_MS, False, True),
    "guard_embed": ("  of which the question's embedding", "ms", 0.0, False, True),
}
# Measures one child process reports together.
GROUPS = {"faq": ("faq_p50", "faq_p95", "guards", "guard_embed")}


def command_seconds(tree: Path, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of `python -m guardrag ARGS` with `tree`'s package first on the
    path (CPU time moves far less than wall time on a machine shared with other work)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "guardrag", *args],
        cwd=tree,  # `-m` puts the working directory first on the path: the tree, not this checkout
        env={**os.environ, **env, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    if done.returncode not in (0, 1):
        raise RuntimeError(f"guardrag {' '.join(args)} failed: {done.stderr[-2000:]}")
    return seconds, cpu


def child(tree: Path, name: str, extra: dict[str, str]) -> dict[str, float]:
    """Run one in-process measure in a fresh interpreter with `tree`'s package."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, "--child-args", json.dumps(extra)],
        env={**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{SCRIPTS}"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed: {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure_in_child(name: str, extra: dict[str, str]) -> dict[str, float]:
    """The body of a --child process: import the package under test, measure, return numbers."""
    if name == "ingest_1k":
        from bench_ingest import measure as ingest_rows  # lazy: the package under test loads here

        rows = ingest_rows(1000, "edge", False)
        return {name: rows.entries / rows.seconds, f"{name}_cpu": rows.entries / rows.cpu_seconds}
    if name == "docs":
        from guardrag.core.embedder import OnnxEmbedder  # lazy: see above
        from guardrag.core.kb.ingest import ingest  # lazy: see above
        from guardrag.core.store.edge import EdgeStore  # lazy: see above

        with tempfile.TemporaryDirectory() as tmp:
            files = synthetic_documents(Path(tmp))
            embedder = OnnxEmbedder()
            embedder.embed(["warm up"])
            store = EdgeStore(Path(tmp) / "data")
            started, cpu = time.perf_counter(), cpu_seconds()
            report = ingest(store, embedder, "docs", files)
            seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
            store.close()
        return {name: report.total / seconds, f"{name}_cpu": report.total / cpu}
    if name == "store":
        from bench_store import time_queries  # lazy: see above

        from guardrag.core.store.edge import EdgeStore  # lazy: see above

        store = EdgeStore(Path(extra["store_dir"]))
        hybrid, plain, hybrid_cpu = time_queries(store, int(extra.get("queries", "300")))
        store.close()
        return {
            name: statistics.median(hybrid),
            f"{name}_cpu": statistics.median(hybrid_cpu),
            "dense": statistics.median(plain),
        }
    if name == "faq":
        from bench_faq import measure as faq  # lazy: see above

        run = faq(SAMPLE_FAQ, REPO / "datasets/ewallet/golden.jsonl", KB, int(extra["rounds"]))
        answered = run.answered()
        return {
            "faq_p50": statistics.median(answered),
            "faq_p95": percentile(answered, 0.95),
            "guards": statistics.median(run.guards),
            "guard_embed": statistics.median(run.embeds),
        }
    raise ValueError(f"unknown child measure {name!r}")


def build_store(folder: Path, size: int) -> None:
    from bench_store import DIM, points  # lazy: only --build-store needs them

    from guardrag.core.store import KBInfo  # lazy: see above
    from guardrag.core.store.edge import EdgeStore  # lazy: see above

    store = EdgeStore(folder)
    started = time.perf_counter()
    store.publish("bench", points(size, 11), KBInfo("bench", f"bench{size}", size, DIM))
    store.close()
    print(f"published {size} points in {time.perf_counter() - started:.0f} s -> {folder}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the quick commands")
    parser.add_argument("--heavy-rounds", type=int, default=1, help="rounds of the heavy ones")
    parser.add_argument("--faq-rounds", type=int, default=2, help="bench_faq --rounds")
    parser.add_argument("--baseline", type=Path, help="a copy of another revision to compare")
    parser.add_argument(
        "--tree", type=Path, help="the copy to measure as 'now' (default: this checkout)"
    )
    parser.add_argument("--store-dir", type=Path, help="an Edge store made with --build-store")
    parser.add_argument("--build-store", type=Path, help="publish --store-points there, exit")
    parser.add_argument("--store-points", type=int, default=100_000)
    parser.add_argument("--only", nargs="+", choices=[*MEASURES, *GROUPS], help="these only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-args", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_in_child(args.child, json.loads(args.child_args))))
        return
    if args.build_store:
        build_store(args.build_store, args.store_points)
        return
    if min(args.rounds, args.heavy_rounds, args.faq_rounds) < 1:
        parser.error("rounds must be positive")
    now = (args.tree or REPO).resolve()
    trees = {"now": now, **({"before": args.baseline.resolve()} if args.baseline else {})}
    wanted = set(args.only or [*MEASURES, *GROUPS])
    if "store" in wanted and not args.store_dir:
        print("store: skipped (give --store-dir, made with --build-store DIR)")
        wanted.discard("store")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average {load_average()}")
    results: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with tempfile.TemporaryDirectory() as tmp:
        runs = plan(Path(tmp), wanted, args, trees)
        for round_number in range(max(args.rounds, args.heavy_rounds)):
            for _name, heavy, run in runs:
                if round_number >= (args.heavy_rounds if heavy else args.rounds):
                    continue
                for label, tree in trees.items():
                    for key, value in run(tree).items():
                        results[key][label].append(value)
            print(f"round {round_number + 1} done, load average {load_average()}", flush=True)
    print(f"load average at the end {load_average()}")
    report(results, trees)


def plan(
    tmp: Path, wanted: set[str], args: argparse.Namespace, trees: dict[str, Path]
) -> list[tuple[str, bool, Callable[[Path], dict[str, float]]]]:
    """(name, heavy, run(tree) -> {measure: value}) for each wanted measure, in table order."""
    data = {label: tmp / label for label in ("now", "before")}
    no_llm = {"GUARDRAG_LLM_LOCAL": "false", "GUARDRAG_LOG_JSON": "false"}

    def env(tree: Path) -> dict[str, str]:
        return {
            **no_llm,
            "GUARDRAG_DATA_DIR": str(data["now" if tree == trees["now"] else "before"]),
        }

    def whole(name: str, command: list[str]) -> Callable[[Path], dict[str, float]]:
        def run(tree: Path) -> dict[str, float]:
            wall, cpu = command_seconds(tree, command, env(tree))
            return {name: wall, f"{name}_cpu": cpu}

        return run

    def ingest(tree: Path) -> dict[str, float]:
        folder = Path(tempfile.mkdtemp(dir=tmp))
        command = ["ingest", str(SAMPLE_FAQ), "--kb", KB]
        wall, cpu = command_seconds(tree, command, {**env(tree), "GUARDRAG_DATA_DIR": str(folder)})
        return {"ingest": wall, "ingest_cpu": cpu}

    runs: list[tuple[str, bool, Callable[[Path], dict[str, float]]]] = []
    for tree_data in data.values():  # ask and kbs need the sample KB, ingested once per tree
        tree_data.mkdir()
    for label, tree in trees.items():
        if {"ask", "kbs"} & wanted:
            command_seconds(
                tree,
                ["ingest", str(SAMPLE_FAQ), "--kb", KB],
                {**no_llm, "GUARDRAG_DATA_DIR": str(data[label])},
            )
    commands = {
        "help": ["--help"],
        "kbs": ["kbs"],
        "audit": ["audit", "--help"],
        "ask": ["ask", QUESTION, "--kb", KB],
    }
    for name in MEASURES:
        if name not in wanted:
            continue
        heavy = MEASURES[name][4]
        if name in commands:
            runs.append((name, heavy, whole(name, commands[name])))
        elif name == "ingest":
            runs.append((name, heavy, ingest))
        elif name in ("ingest_1k", "docs", "store"):
            extra = {"store_dir": str(args.store_dir)} if name == "store" else {}
            runs.append((name, heavy, functools.partial(child, name=name, extra=extra)))
    if "faq" in wanted or wanted & set(GROUPS["faq"]):
        extra = {"rounds": str(args.faq_rounds)}
        runs.append(("faq", True, lambda tree: child(tree, "faq", extra)))
    return runs


def report(results: dict[str, dict[str, list[float]]], trees: dict[str, Path]) -> None:
    """One row per measure: medians, the ratio now/before, the budget and whether it is met;
    then the same in CPU time (a rate: per CPU-second), where the measure has it."""
    print(
        f"\n{'what':<46} {'now':>9} {'before':>9} {'ratio':>7} {'budget':>8}  met   "
        f"{'cpu now':>9} {'before':>9} {'ratio':>7}"
    )

    def medians(key: str) -> tuple[float, float | None]:
        before = results[key].get("before") if "before" in trees else None
        return statistics.median(results[key]["now"]), statistics.median(before) if before else None

    for name, (what, unit, budget, higher, _) in MEASURES.items():
        if name not in results:
            continue
        line = f"{what:<46} {_triple(*medians(name))} "
        limit = f"{'>=' if higher else '<='}{budget:g}" if budget else ""
        now = medians(name)[0]
        met = (
            "" if not budget else ("yes" if (now >= budget if higher else now <= budget) else "no")
        )
        line += f"{limit:>8}  {met:<4}"
        if f"{name}_cpu" in results:
            line += f"  {_triple(*medians(f'{name}_cpu'))}"
        print(f"{line}  ({unit})")


def _triple(now: float, before: float | None) -> str:
    """'now before ratio' columns."""
    if before is None:
        return f"{now:9.3g} {'':>9} {'':>7}"
    return f"{now:9.3g} {before:9.3g} {now / before:6.2f}x"


if __name__ == "__main__":
    main()
