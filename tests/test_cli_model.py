"""`guardrag ask` with the real bundled model: the first call starts the model server in the
background and leaves it up; the second reuses it instead of loading the model again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.llm.supervisor import read_state
from tests.real_model import TWO_PART, handbook_env

pytestmark = pytest.mark.slow


def _guardrag(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "guardrag", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, time.monotonic() - started


def test_a_second_ask_reuses_the_model_the_first_started(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GUARDRAG_")}
    env = {**clean, **handbook_env(embedder, tmp_path)}
    try:
        first, first_s = _guardrag(env, "ask", TWO_PART, "--json")
        assert first.returncode == 0, first.stderr[-2000:]
        assert "starting" in first.stderr and "guardrag llm stop" in first.stderr
        state = read_state(Path(env["GUARDRAG_DATA_DIR"]) / "llm")
        assert state is not None
        second, second_s = _guardrag(env, "ask", TWO_PART, "--json")
        assert second.returncode == 0, second.stderr[-2000:]
        assert "starting" not in second.stderr, second.stderr
        again = read_state(Path(env["GUARDRAG_DATA_DIR"]) / "llm")
        assert again is not None and again.pid == state.pid  # the same server answered
        for done in (first, second):
            assert json.loads(done.stdout)["route"] == "generated", done.stdout[-1500:]
        print(
            f"\nguardrag ask with the bundled model: first {first_s:.1f} s, second {second_s:.1f} s"
        )
    finally:
        _guardrag(env, "llm", "stop")
