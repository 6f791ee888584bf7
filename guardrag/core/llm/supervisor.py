"""The bundled model's server process, supervised: one per data dir, shared across processes.

`<data_dir>/llm/server.json` names the running server, the process that supervises it and the
API key it was started with; `server.lock` serialises starting it, so the app, `guardrag ask`
and `guardrag llm start` share one server instead of loading the model twice. The process that
starts the server owns it: it restarts it after a crash on the same port and with the same
key (clients keep their URL), and stops it on exit. What the server runs is a command given
by the caller (`guardrag.core.llm.local` runs `guardrag.core.llm.server`; tests a fake).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from guardrag.core.llm.server import HOST, KEY_ENV

log = logging.getLogger("guardrag.llm")


class LocalServerError(RuntimeError):
    """The local model server could not be started; the message says why and where its log is."""


# --- the server's state, shared by every process using one data dir ----------------------------


@dataclass(frozen=True)
class ServerState:
    """What `<data_dir>/llm/server.json` says about the running server."""

    port: int
    pid: int  # the llama.cpp server process
    supervisor: int  # the process that restarts it after a crash and stops it on exit
    detached: bool  # supervised by `guardrag llm start`, not by an app that happens to run
    model: str
    started: float
    log: str
    key: str = ""  # the API key the server requires (random per supervisor start)

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API's base URL."""
        return f"{self.root_url}/v1"


def read_state(directory: Path) -> ServerState | None:
    try:
        return ServerState(**json.loads((directory / "server.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_state(directory: Path, state: ServerState) -> None:
    tmp = directory / f"server.json.{os.getpid()}.tmp"
    # It holds the server's API key: readable by this user only.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(asdict(state), indent=1))
    os.replace(tmp, directory / "server.json")


def _clear_state(directory: Path, pid: int) -> None:
    """Remove the state file only if it still names server `pid` (a restart may have replaced it)."""
    state = read_state(directory)
    if state is not None and state.pid == pid:
        (directory / "server.json").unlink(missing_ok=True)


@contextlib.contextmanager
def _lock(directory: Path, timeout_s: float) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "server.lock").open("a") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LocalServerError(
                        f"another process held {directory / 'server.lock'} for {timeout_s:.0f}s "
                        "while starting the local model server; try again"
                    ) from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):  # an unreaped child is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _serves_port(pid: int, port: int) -> bool:
    """Guards against pid reuse before we signal a process we did not start."""
    try:
        return str(port) in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return False


# Health checks go straight to loopback even when an HTTP proxy is configured.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def healthy(url: str, timeout_s: float = 2.0) -> bool:
    """GET /health answers 200 (503 while loading): the model is loaded and takes requests.

    `url` is the server's root or its `/v1` base URL; /health needs no API key.
    """
    root = url.removesuffix("/").removesuffix("/v1")
    try:
        with _DIRECT.open(f"{root}/health", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _kill(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM a process we did not start, then SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _terminate(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


# --- the supervisor -----------------------------------------------------------------------------


class LocalServer:
    """Starts, watches and stops the model server of one data dir, or attaches to a running one.

    The process that starts the server owns it: it restarts it on the same port after a crash
    (at most `max_restarts` times in a row, waiting `backoff_s * 2**n` before each) and stops it
    on `stop()`, at interpreter exit, or on leaving a `with` block. Other processes attach and
    leave it running. `command(port)` is the server's argv, so tests can run a fake server;
    `env` is added to its environment, with the API key the supervisor draws for it.
    """

    def __init__(
        self,
        command: Callable[[int], list[str]],
        directory: Path,
        *,
        model: str,
        start_timeout_s: float = 120.0,
        max_restarts: int = 3,
        backoff_s: float = 1.0,
        stable_s: float = 300.0,
        poll_s: float = 0.5,
        detached: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.command = command
        self.env = env or {}
        self.directory = directory
        self.model = model
        self.start_timeout_s = start_timeout_s
        self.max_restarts = max_restarts
        self.backoff_s = backoff_s
        self.stable_s = stable_s
        self.poll_s = poll_s
        self.detached = detached
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._state: ServerState | None = None
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._guard = threading.RLock()

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def base_url(self) -> str | None:
        return self._state.base_url if self._state else None

    @property
    def api_key(self) -> str:
        """The key the running server requires ("" before start or for a server without one)."""
        return self._state.key if self._state else ""

    @property
    def owned(self) -> bool:
        """This process started the server and will stop it."""
        return self._proc is not None

    @property
    def supervising(self) -> bool:
        """Still watching an owned server (False once stopped or after giving up on restarts)."""
        return self._monitor is not None and self._monitor.is_alive()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Base URL of a healthy server for this data dir: the running one, or one we start."""
        with self._guard:
            if self._state is not None and (self.supervising or healthy(self._state.base_url)):
                return self._state.base_url
            self._state = self._proc = None
            deadline = time.monotonic() + self.start_timeout_s
            while True:
                with _lock(self.directory, self.start_timeout_s + 10):
                    current = read_state(self.directory)
                    supervised = current is not None and pid_alive(current.supervisor)
                    if current and supervised and current.model != self.model:
                        raise LocalServerError(
                            f"the local server of {self.directory.parent} serves "
                            f"{current.model}, not {self.model}: `guardrag llm stop` it first"
                        )
                    if current and supervised and healthy(current.base_url):
                        self._state = current
                        log.info("using the local model server at %s", current.base_url)
                        return current.base_url
                    if current is None or not supervised:
                        if current is not None:  # its supervisor died: nobody would stop it
                            if pid_alive(current.pid) and _serves_port(current.pid, current.port):
                                _kill(current.pid)
                            (self.directory / "server.json").unlink(missing_ok=True)
                        try:
                            self._state = self._spawn(free_port(), secrets.token_urlsafe(24))
                        except LocalServerError:
                            self._proc = None
                            raise
                        break
                # A live supervisor is starting or restarting its server: wait for it.
                if time.monotonic() > deadline:
                    raise LocalServerError(
                        f"the local model server (supervised by pid {current.supervisor}) does "
                        f"not answer at {current.base_url}; see {current.log} "
                        "or `guardrag llm stop --force`"
                    )
                time.sleep(0.5)
            self._stopping.clear()
            self._monitor = threading.Thread(target=self._watch, name="guardrag-llm", daemon=True)
            self._monitor.start()
            atexit.register(self.stop)
            _exit_on_sigterm()
            log.info("started the local model server at %s", self._state.base_url)
            return self._state.base_url

    def _spawn(self, port: int, key: str) -> ServerState:
        """Start the server on `port` requiring `key`, wait until healthy, record it (lock held)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > 5_000_000:
            os.replace(self.log_path, self.log_path.with_suffix(".log.1"))
        argv = self.command(port)
        with self.log_path.open("ab") as log_file:
            log_file.write(f"\n=== {time.ctime()} starting: {' '.join(argv)}\n".encode())
            log_file.flush()
            self._proc = proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env, KEY_ENV: key},
            )
        state = ServerState(
            port=port,
            pid=proc.pid,
            supervisor=os.getpid(),
            detached=self.detached,
            model=self.model,
            started=time.time(),
            log=str(self.log_path),
            key=key,
        )
        deadline = time.monotonic() + self.start_timeout_s
        while not healthy(state.base_url, timeout_s=1.0):
            if proc.poll() is not None:
                raise LocalServerError(
                    f"the local model server exited with code {proc.returncode} while starting; "
                    f"{self.log_path} ends: {_tail(self.log_path)}"
                )
            if time.monotonic() > deadline or self._stopping.is_set():
                _terminate(proc)
                raise LocalServerError(
                    f"the local model server did not answer at {state.base_url} within "
                    f"{self.start_timeout_s:.0f}s; see {self.log_path}"
                )
            time.sleep(0.2)
        _write_state(self.directory, state)
        return state

    def _watch(self) -> None:
        """Restart the server after it dies, within bounds; runs on a daemon thread."""
        failures, since = 0, time.monotonic()
        while not self._stopping.wait(self.poll_s):
            proc, state = self._proc, self._state
            if proc is None or state is None:
                return
            if proc.poll() is None:
                if failures and time.monotonic() - since > self.stable_s:
                    failures = 0
                continue
            recorded = read_state(self.directory)  # still names the last server that came up
            if recorded is None or recorded.pid != state.pid:
                log.warning("the local model server was stopped from outside; not restarting")
                return
            if proc.returncode == 0:
                # It exits 0 only when asked to: a signal to the whole process group (Ctrl+C
                # on `make run` reaches it before the app shuts down) or its parent gone. A
                # stop, not a crash: restarting would load the model again for nothing.
                log.info("the local model server stopped when asked to; not restarting")
                _clear_state(self.directory, state.pid)
                return
            if failures >= self.max_restarts:
                log.error(
                    "the local model server died %d times in a row; giving up (see %s)",
                    failures + 1,
                    self.log_path,
                )
                _clear_state(self.directory, state.pid)
                return
            delay = self.backoff_s * 2**failures
            failures += 1
            log.warning(
                "the local model server exited with code %s; restart %d/%d in %.1fs",
                proc.returncode,
                failures,
                self.max_restarts,
                delay,
            )
            if self._stopping.wait(delay):
                return
            try:
                with self._guard, _lock(self.directory, self.start_timeout_s + 10):
                    # Same port and key: clients built for the last server keep working.
                    self._state = self._spawn(state.port, state.key)
                self.restarts += 1
                since = time.monotonic()
            except LocalServerError as exc:
                log.error("restarting the local model server failed: %s", exc)

    def stop(self) -> None:
        """Stop the server if this process owns it; idempotent."""
        self._stopping.set()
        monitor = self._monitor
        if monitor is not None and monitor is not threading.current_thread():
            monitor.join()
        with self._guard:
            proc, self._proc, self._state, self._monitor = self._proc, None, None, None
            if proc is not None:
                _terminate(proc)
                _clear_state(self.directory, proc.pid)
                log.info("stopped the local model server (pid %d)", proc.pid)
        atexit.unregister(self.stop)


def _exit_on_sigterm() -> None:
    """Make a plain SIGTERM run atexit (and so stop our server) where nobody handles it yet."""
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def stop_server(directory: Path, *, force: bool = False) -> str:
    """Stop the server of a data dir from any process (`guardrag llm stop`); says what it did."""
    state = read_state(directory)
    if state is None:
        return "the local model server is not running"
    if pid_alive(state.supervisor) and state.supervisor != os.getpid():
        if state.detached:
            _kill(state.supervisor, grace_s=20.0)  # it stops its server and clears the state
            if pid_alive(state.pid) and _serves_port(state.pid, state.port):
                _kill(state.pid)  # its supervisor had to be killed before it could
            _clear_state(directory, state.pid)
            return f"stopped the local model server (supervisor pid {state.supervisor})"
        if not force:
            raise LocalServerError(
                f"the local model server is supervised by a running guardrag process "
                f"(pid {state.supervisor}) and stops with it; --force stops it anyway"
            )
    # Clear the state first so its supervisor sees an outside stop, not a crash to restart.
    (directory / "server.json").unlink(missing_ok=True)
    if pid_alive(state.pid) and _serves_port(state.pid, state.port):
        _kill(state.pid)
    return f"stopped the local model server (pid {state.pid})"
