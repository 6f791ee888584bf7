"""Throwaway PostgreSQL and Redis servers for the suite (Debian's packages, `make services`).

Loaded by tests/conftest.py (`pytest_plugins`). Each server starts once per session on a
private socket directory (Postgres) or a free loopback port (Redis) and is stopped at the end.
When the binaries are missing a test that needs them is skipped, unless the servers are
required: `GUARDRAG_REQUIRE_SERVICES=1` (set by `make test`, which installs them first) or a
`CI` variable (any value but empty, 0 or false). Then it fails, so a missing install step can
never pass as a green run.

As root (CI containers), Postgres refuses to run; the server then runs as the unprivileged
`postgres` OS user (from postgresql-common; `nobody` otherwise) through subprocess's
`user=`/`group=`, in a directory under /tmp that user can reach.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import pytest


def required() -> bool:
    """Must the servers be there (`make test`, CI) rather than their tests skipped?"""
    ci = os.environ.get("CI", "").strip().lower()
    return os.environ.get("GUARDRAG_REQUIRE_SERVICES") == "1" or ci not in ("", "0", "false")


def missing(what: str) -> NoReturn:
    """Skip for want of a server binary, or fail when they are required (`make services`
    installs them)."""
    message = f"{what} not found: run `make services` (Debian's postgresql and redis-server)"
    if required():
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- PostgreSQL -----------------------------------------------------------------------------


def postgres_bindir() -> Path | None:
    """$PG_BINDIR, else the newest /usr/lib/postgresql/NN/bin (Debian keeps it off PATH)."""
    if env := os.environ.get("PG_BINDIR"):
        return Path(env)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _unprivileged() -> pwd.struct_passwd:
    for name in (os.environ.get("PG_TEST_OS_USER"), "postgres", "nobody"):
        try:
            user = pwd.getpwnam(name) if name else None
        except KeyError:
            continue
        if user is not None and user.pw_uid != 0:
            return user
    raise RuntimeError("running as root with no unprivileged user (postgres, nobody) for Postgres")


class TempPostgres:
    """initdb + pg_ctl in a fresh directory; listens on a Unix socket there only."""

    user = "postgres"  # the database superuser initdb creates (trust auth on the socket)
    port = 5432  # only names the socket file; nothing listens on TCP

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        # Directly under /tmp and short: pytest's tmp dirs are 0700 (the server user cannot
        # enter them) and a socket path must fit in 107 bytes.
        self.base = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            user = _unprivileged()
            os.chown(self.base, user.pw_uid, user.pw_gid)
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}

    @property
    def data(self) -> Path:
        return self.base / "data"

    def start(self) -> TempPostgres:
        self._run(
            "initdb",
            "-D",
            self.data,
            "-U",
            self.user,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
            "--no-instructions",
        )
        options = (
            f"-c port={self.port} -c unix_socket_directories='{self.base}' "
            "-c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB"
        )
        self._run(
            "pg_ctl", "start", "-w", "-t", "60", "-D", self.data, "-l", self.log, "-o", options
        )
        return self

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", self.data, check=False)
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """A postgresql:// URL; the socket directory is the percent-encoded host."""
        return f"postgresql://{self.user}@{quote(str(self.base), safe='')}:{self.port}/{database}"

    def fresh_schema(self) -> str:
        """A URL whose tables land in a new, empty schema (one a test): as isolated as a
        database for our tables, without copying a template (the data dir stays small, so
        the server stops and is removed in a moment)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def _run(self, program: str, *args: str | Path, check: bool = True) -> None:
        done = subprocess.run(
            [str(self.bindir / program), *map(str, args)],
            cwd=self.base,  # the server user cannot read root's cwd
            env={**os.environ, "LC_ALL": "C.UTF-8", "PGTZ": "UTC"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            start_new_session=True,  # a Ctrl-C in pytest reaches pg_ctl stop, not the server
            **self._as,
        )
        if check and done.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr}{tail}")


@pytest.fixture(scope="session")
def postgres() -> Iterator[TempPostgres]:
    """One PostgreSQL server for the session."""
    bindir = postgres_bindir()
    if bindir is None or not (bindir / "initdb").exists():
        missing("PostgreSQL (initdb)")
    server = TempPostgres(bindir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres: TempPostgres) -> str:
    """A fresh schema on the session's server, as a URL."""
    return postgres.fresh_schema()


# --- Redis ------------------------------------------------------------------------------------


class TempRedis:
    """redis-server on a free loopback port, no persistence, our child process."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.workdir = Path(tempfile.mkdtemp(prefix="redis-"))
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, attempts: int = 3) -> TempRedis:
        for _ in range(attempts):  # the free port may be taken between probe and bind
            self.port = free_port()
            with (self.workdir / "redis.log").open("ab") as log:
                self.process = subprocess.Popen(
                    [
                        self.binary,
                        *("--port", str(self.port), "--bind", "127.0.0.1"),
                        *("--save", "", "--appendonly", "no", "--dir", str(self.workdir)),
                        *("--daemonize", "no", "--loglevel", "warning", "--logfile", ""),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            if self._ready(5.0):
                return self
            self.kill()
        raise RuntimeError(
            f"redis-server did not start: {(self.workdir / 'redis.log').read_text()}"
        )

    def _ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                time.sleep(0.01)
        return False

    def freeze(self) -> None:
        """SIGSTOP: a hung server (the kernel accepts connections, nothing answers)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def redis_binary() -> str | None:
    found = shutil.which("redis-server") or "/usr/bin/redis-server"
    return found if os.path.exists(found) else None


def start_redis() -> TempRedis:
    """A fresh server of one's own (for tests that kill or freeze it)."""
    binary = redis_binary()
    if binary is None:
        missing("redis-server")
    return TempRedis(binary).start()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[TempRedis]:
    """One Redis server for the session."""
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: TempRedis) -> str:
    """The session's Redis, emptied for this test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    client.close()
    return redis_server.url
