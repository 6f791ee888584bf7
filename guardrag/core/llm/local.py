"""The bundled model's server for given settings: started on demand, one per data dir.

When GUARDRAG_LLM_BASE_URL is unset, guardrag serves the configured GGUF model
(`guardrag.core.llm.models`) through llama.cpp's own server from the prebuilt xllamacpp wheel
(`guardrag.core.llm.server`), supervised by `guardrag.core.llm.supervisor`. `local_server`
starts it the first time a process needs it; `guardrag llm start` runs the same supervisor
detached (`python -m guardrag.core.llm.local serve`) so the server outlives the command.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from guardrag.config.settings import Settings
from guardrag.core.llm.models import MODELS, model_path, model_problem
from guardrag.core.llm.supervisor import LocalServer, LocalServerError

log = logging.getLogger("guardrag.llm")

RUNTIME = "xllamacpp"
#: Environment of the server process. OpenMP's workers otherwise spin at every barrier, and on
#: a busy 2-core machine a descheduled one makes generation collapse to ~1 token/s.
SERVER_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}


def state_dir(settings: Settings) -> Path:
    return settings.data_dir / "llm"


def runtime_problem() -> str | None:
    """Why the prebuilt runtime cannot run here, or None."""
    if importlib.util.find_spec(RUNTIME) is None:
        return f"{RUNTIME} is not installed (`pip install -e .` installs it)"
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return None  # not Linux: let the server say what it thinks
    if "avx2" not in flags:
        return f"this CPU lacks AVX2, which the prebuilt {RUNTIME} wheel needs"
    return None


def install_problem(settings: Settings) -> str | None:
    """Why the local model cannot be served from these settings, or None when it can."""
    return runtime_problem() or model_problem(
        model_path(settings), MODELS[settings.llm_local_model]
    )


def server_command(settings: Settings) -> Callable[[int], list[str]]:
    """argv of the server process for the configured model, given its port."""
    options = {
        "--model": str(model_path(settings)),
        "--alias": settings.llm_local_model,
        "--ctx": str(settings.llm_ctx),
        "--parallel": str(settings.llm_parallel),
        "--threads": str(settings.llm_threads or os.cpu_count() or 1),
        "--cache-mib": str(settings.llm_cache_mib),
    }
    flat = [part for pair in options.items() for part in pair]

    def command(port: int) -> list[str]:
        return [sys.executable, "-m", "guardrag.core.llm.server", *flat, "--port", str(port)]

    return command


def server_for(settings: Settings, *, detached: bool = False) -> LocalServer:
    return LocalServer(
        server_command(settings),
        state_dir(settings),
        model=settings.llm_local_model,
        start_timeout_s=settings.llm_start_timeout_s,
        detached=detached,
        env=SERVER_ENV,
    )


_servers: dict[Path, LocalServer] = {}
_servers_lock = threading.Lock()
_problems: dict[Path, str] = {}


def local_server(settings: Settings) -> LocalServer | None:
    """This data dir's local model server, started if need be and healthy.

    None when the local model is off, not installed or will not start; the reason is logged
    once per process and kept for `problem`, so `generate` refusing llm_unavailable and the
    UI have an explanation.
    """
    if not settings.llm_local:
        return None
    key = state_dir(settings).resolve()
    missing = install_problem(settings)
    if missing:
        _note(
            key,
            f"the local model is not installed ({missing}); `make llm` or `guardrag llm "
            "install` installs it",
        )
        return None
    with _servers_lock:
        server = _servers.setdefault(key, server_for(settings))
    try:
        server.start()
    except LocalServerError as exc:
        _note(key, f"the local model server did not start: {exc}")
        return None
    _problems.pop(key, None)
    return server


def _note(key: Path, problem: str) -> None:
    if _problems.get(key) != problem:
        log.warning("no LLM: GUARDRAG_LLM_BASE_URL is unset and %s", problem)
    _problems[key] = problem


def problem(settings: Settings) -> str | None:
    """Why `local_server` last found no server for these settings (None: it did, or not asked)."""
    if not settings.llm_local:
        return "the local model is off (GUARDRAG_LLM_LOCAL=false)"
    return _problems.get(state_dir(settings).resolve())


def stop_all() -> None:
    """Stop every server `local_server` started in this process (atexit does it too)."""
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()


def serve(settings: Settings) -> int:
    """Supervise the server in the foreground until SIGTERM (what `guardrag llm start` runs)."""
    server = server_for(settings, detached=True)
    done = threading.Event()

    def on_signal(*_: Any) -> None:
        done.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        url = server.start()
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not server.owned:
        print(f"already running at {url}")
        return 0
    print(f"serving {settings.llm_local_model} at {url}", flush=True)
    while server.supervising and not done.wait(1.0):
        pass
    server.stop()
    return 0


def spawn_supervisor(log_file: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start `serve` as its own session, so it outlives the CLI and the terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "guardrag.core.llm.local", "serve"],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


if __name__ == "__main__":
    from guardrag.config.settings import load_settings

    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: python -m guardrag.core.llm.local serve")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    sys.exit(serve(load_settings()))
