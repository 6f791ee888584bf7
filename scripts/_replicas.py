"""The servers scripts/load_api.py drives: one `guardrag serve` on the sample KB, or N replicas
sharing one Postgres and one Redis (the reference deployment of docs/DEPLOY.md), a SIGKILL to
one of them mid-load, and the CPU time they spent.

Each replica has its own data dir and its own copy of the KBs published once in
root/published (GUARDRAG_EDGE_SOURCE_DIR); audit and conversations go to one Postgres, rate
limits to one Redis (throwaway servers from tests/servers.py unless URLs are given). Servers
run without an LLM (GUARDRAG_LLM_LOCAL=false, no endpoint): questions that need generation
are refused at once, so a load measures guards, retrieval, rerank and audit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
FAQ = REPO / "datasets" / "ewallet" / "faq.jsonl"
KB = "kinetic"
GUARDRAG = [sys.executable, "-m", "guardrag"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float = 180.0) -> None:
    """Poll /ready until it answers 200; raise if the server exits or takes too long."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"guardrag serve exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"guardrag serve not ready after {timeout_s:.0f} s")


def ingest(env: dict[str, str], faq: Path = FAQ) -> None:
    """`guardrag ingest` of an FAQ file as the sample KB, with these settings."""
    done = subprocess.run(
        [*GUARDRAG, "ingest", str(faq), "--kb", KB, "--description", "Kinetic Wallet"],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"guardrag ingest failed ({done.returncode}): {done.stderr[-2000:]}")


def start_server(
    env: dict[str, str], log: Path, args: Sequence[str] = ()
) -> tuple[str, subprocess.Popen[bytes]]:
    """`guardrag serve` on a free loopback port; not waited for (see wait_ready)."""
    port = _free_port()
    # The server's log goes to a file: a pipe nobody reads would fill up and stall it.
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*GUARDRAG, "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return f"http://127.0.0.1:{port}", process


def base_env(**settings: str) -> dict[str, str]:
    """The environment of a server under load: no LLM, sample KB by default."""
    env = {
        **os.environ,
        "GUARDRAG_DEFAULT_KB": KB,
        "GUARDRAG_LLM_LOCAL": "false",
        "GUARDRAG_LLM_BASE_URL": "",
        "GUARDRAG_AUDIT_URL": "",
        "PYTHONPATH": str(REPO),
    }
    env.update({f"GUARDRAG_{k.upper()}": v for k, v in settings.items()})
    return env


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[bytes]
    data_dir: Path


def serve_sample(data_dir: Path, env: dict[str, str]) -> Replica:
    """Ingest the sample KB into data_dir and start `guardrag serve` there."""
    ingest(env)
    url, process = start_server(env, data_dir / "serve.log")
    replica = Replica(url, process, data_dir)
    try:
        wait_ready(url, process)
    except BaseException:
        stop([replica])
        raise
    return replica


def start_replicas(
    root: Path,
    count: int,
    audit_url: str,
    redis_url: str,
    args: Sequence[str] = ("--no-ui",),
    **settings: str,
) -> list[Replica]:
    """`count` replicas under root (`guardrag serve` + `args`, API only by default): each its
    own data dir and copy of the KBs published in root/published, one audit and conversation
    store, one Redis. Waits until all are ready."""
    replicas = []
    for n in range(count):
        data_dir = root / f"replica-{n}"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = base_env(
            data_dir=str(data_dir),
            edge_source_dir=str(root / "published"),
            audit_url=audit_url,
            redis_url=redis_url,
            **settings,
        )
        url, process = start_server(env, data_dir / "serve.log", args)
        replicas.append(Replica(url, process, data_dir))
    try:
        for replica in replicas:
            wait_ready(replica.url, replica.process)
    except BaseException:
        stop(replicas)
        raise
    return replicas


def stop(replicas: Sequence[Replica], timeout_s: float = 60.0) -> None:
    """SIGINT each (a clean stop drains the audit queue), then wait; SIGKILL laggards."""
    for replica in replicas:
        if replica.process.poll() is None:
            replica.process.send_signal(signal.SIGINT)
    for replica in replicas:
        try:
            replica.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            replica.process.kill()
            replica.process.wait()


@dataclass
class Backends:
    audit_url: str
    redis_url: str
    pids: list[int]  # the throwaway servers' processes (their CPU time is reported)


@contextmanager
def services(audit_url: str | None, redis_url: str | None) -> Iterator[Backends]:
    """The given Postgres and Redis URLs, or throwaway servers (tests/servers.py)."""
    if audit_url and redis_url:
        yield Backends(audit_url, redis_url, [])
        return
    sys.path.insert(0, str(REPO))
    # lazy: only when a throwaway server is wanted; tests/ is not an installed package
    from tests.servers import TempPostgres, TempRedis, postgres_bindir, redis_binary

    bindir, binary = postgres_bindir(), redis_binary()
    if (not audit_url and bindir is None) or (not redis_url and binary is None):
        raise SystemExit("PostgreSQL or redis-server not found: run `make services`")
    postgres = TempPostgres(bindir).start() if not audit_url and bindir else None
    redis = TempRedis(binary).start() if not redis_url and binary else None
    pids = [int((postgres.data / "postmaster.pid").read_text().split()[0])] if postgres else []
    pids += [redis.process.pid] if redis and redis.process else []
    try:
        yield Backends(
            audit_url or (postgres.url() if postgres else ""),
            redis_url or (redis.url if redis else ""),
            pids,
        )
    finally:
        if postgres:
            postgres.stop()
        if redis:
            redis.stop()


@dataclass
class Deployment:
    """What a load runs against: its URLs, the audit log to check (None: not known), the
    processes whose CPU time counts, and the replicas a SIGKILL took down."""

    urls: list[str]
    audit_url: str | None
    replicas: list[Replica] = field(default_factory=list)
    backend_pids: list[int] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    _stops: ExitStack = field(default_factory=ExitStack)

    @property
    def server_pids(self) -> list[int]:
        return [r.process.pid for r in self.replicas]

    def kill_first_after(self, seconds: float) -> None:
        """SIGKILL the first replica `seconds` from now (a crash: nothing drains)."""

        def kill() -> None:
            self.replicas[0].process.send_signal(signal.SIGKILL)
            self.killed.append(self.replicas[0].url)

        timer = threading.Timer(seconds, kill)
        timer.start()
        self._stops.callback(timer.cancel)

    def stop(self) -> None:
        """Stop the servers under load (a clean stop drains their audit queues); the shared
        Postgres and Redis stay up until the deployment's context ends. Idempotent."""
        self._stops.close()


@contextmanager
def deploy(
    root: Path,
    *,
    url: str | None = None,
    audit_url: str | None = None,
    redis_url: str | None = None,
    replicas: int = 0,
    **settings: str,
) -> Iterator[Deployment]:
    """`url` as it is (its audit log `audit_url` if given); else `replicas` replicas on
    shared Postgres and Redis; else one `guardrag serve` with SQLite under root."""
    with ExitStack() as outer:
        if url:
            deployment = Deployment([url], audit_url)
        elif replicas:
            backends = outer.enter_context(services(audit_url, redis_url))
            ingest(base_env(data_dir=str(root / "published")))
            started = start_replicas(
                root, replicas, backends.audit_url, backends.redis_url, **settings
            )
            deployment = Deployment(
                [r.url for r in started], backends.audit_url, started, backends.pids
            )
        else:
            one = serve_sample(root, base_env(data_dir=str(root), **settings))
            deployment = Deployment([one.url], str(root / "audit.sqlite3"), [one])
        deployment._stops.callback(stop, deployment.replicas)
        outer.callback(deployment.stop)  # before the backends: registered after them
        yield deployment


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time of these processes and all their descendants, now (Linux)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / tick
    wanted, total = set(pids), 0.0
    for pid in sorted(times):
        chain, seen = pid, 0
        while chain and chain not in wanted and seen < 64:
            chain, seen = parents.get(chain, 0), seen + 1
        if chain in wanted:
            total += times[pid]
    return total
