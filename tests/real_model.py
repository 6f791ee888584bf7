"""`guardrag serve` as a subprocess for end-to-end tests, and the same with the bundled local
model answering (the real Qwen model through llama.cpp's server, supervised by guardrag).

The real-model server skips its tests when the model is not installed, and fails them under
`GUARDRAG_REQUIRE_LOCAL_LLM=1` (`make test` installs it first), as tests/test_local_llm.py does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from guardrag.config.settings import Settings, load_settings
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.llm import local as local_llm
from guardrag.core.llm.models import model_path
from guardrag.core.store.edge import EdgeStore
from tests.test_api import free_port

REQUIRE_MODEL = os.environ.get("GUARDRAG_REQUIRE_LOCAL_LLM") == "1"

#: A small document KB: its passages always go to the model, whose answer is then checked.
HANDBOOK_KB = "handbook"
HANDBOOK = """# Salary and payslips

Salaries are paid on the 25th of each month. When the 25th falls on a weekend or a public \
holiday, salary is paid on the working day before it. Payslips are available in the staff \
portal two days before payday.

# Annual leave

Full-time staff get 18 days of annual leave a year. Up to 5 unused days can be carried over \
to the next year. Leave requests must be approved by your manager at least one week in advance.
"""
#: The real model answers it in two or three sentences, each supported by the handbook
#: (measured: 'Full-time staff get 18 days ...', 'Up to 5 unused days ...').
TWO_PART = "How much annual leave do I get and can I carry days over?"


@contextmanager
def serve(env: dict[str, str], *args: str, ready_s: float = 180) -> Iterator[str]:
    """`guardrag serve` on a free loopback port with `env` (GUARDRAG_* of this process left
    out); yields its base URL once /ready says 200, and stops it afterwards."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GUARDRAG_")}
    # Its log goes to a file: a pipe nobody reads fills up (64 KiB) and blocks the server.
    log = tempfile.NamedTemporaryFile("w+", prefix="guardrag-serve-", suffix=".log")  # noqa: SIM115
    server = subprocess.Popen(
        [sys.executable, "-m", "guardrag", "serve", "--port", str(port), *args],
        env={**clean, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if server.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"guardrag serve exited: {log.read()[-2000:]}")
            try:
                if httpx.get(f"{base}/ready", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("guardrag serve did not get ready")
            time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def require_installed(settings: Settings) -> None:
    """Skip without the local model these settings name; fail when the run requires it
    (`make test` sets GUARDRAG_REQUIRE_LOCAL_LLM=1 after `make llm`)."""
    problem = local_llm.install_problem(settings)
    if problem:
        message = f"local model not installed ({problem}); `make llm` installs it"
        if REQUIRE_MODEL:
            pytest.fail(message)
        pytest.skip(message)


def installed_model() -> Settings:
    """Settings naming the installed local model (where `make llm` put it, or
    GUARDRAG_LLM_MODEL_DIR); skips, or fails when the model is required, without one."""
    installed = load_settings()
    settings = Settings(
        llm_local=True,
        llm_local_model=installed.llm_local_model,
        llm_model_dir=model_path(installed).parent,
    )
    require_installed(settings)
    return settings


def handbook_data(embedder: OnnxEmbedder, folder: Path) -> Path:
    """A data dir under `folder` holding the handbook KB (the real store, the real embedder)."""
    data = folder / "data"
    document = folder / "handbook.md"
    document.write_text(HANDBOOK)
    store = EdgeStore(data)
    try:
        ingest(store, embedder, HANDBOOK_KB, [document], description="Staff handbook")
    finally:
        store.close()
    return data


def handbook_env(embedder: OnnxEmbedder, folder: Path) -> dict[str, str]:
    """GUARDRAG_* settings for a process over the handbook KB with the real local model."""
    model = installed_model()
    return {
        "GUARDRAG_DATA_DIR": str(handbook_data(embedder, folder)),
        "GUARDRAG_DEFAULT_KB": HANDBOOK_KB,
        "GUARDRAG_LLM_LOCAL": "true",
        "GUARDRAG_LLM_LOCAL_MODEL": model.llm_local_model,
        "GUARDRAG_LLM_MODEL_DIR": str(model.llm_model_dir),
    }


@contextmanager
def serve_real_model(
    embedder: OnnxEmbedder, folder: Path, extra: dict[str, str] | None = None, *args: str
) -> Iterator[str]:
    """`guardrag serve` over the handbook KB (the default) with the real local model behind
    it; the model server starts with the app and stops with it."""
    env = {
        **handbook_env(embedder, folder),
        "GUARDRAG_LLM_TIMEOUT_S": "120",
        "GUARDRAG_RATE_LIMIT_BURST": "1000",
        **(extra or {}),
    }
    with serve(env, *args) as base:
        yield base
