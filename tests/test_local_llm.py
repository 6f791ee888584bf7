"""The local LLM: its supervisor against a fake server process, `guardrag llm`, and the real
model end to end when it is installed (slow): an answer, a follow-up, a kill -9 mid-answer."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from guardrag.config.settings import Settings, load_settings
from guardrag.contract import Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.llm import local as local_llm
from guardrag.core.llm import supervisor
from guardrag.core.llm.client import (
    LOCAL_TIMEOUT_S,
    load_chat_model,
    local_endpoint,
    timeout_s,
    unavailable_reason,
)
from guardrag.core.llm.models import model_path
from guardrag.core.llm.supervisor import (
    LocalServer,
    LocalServerError,
    ServerState,
    healthy,
    pid_alive,
    read_state,
    stop_server,
)
from guardrag.core.store import VectorStore
from guardrag.faces.cli.llm import llm_app
from guardrag.faces.eval.evaluate import load_cases
from guardrag.faces.service import Guardrag
from tests.conftest import KB, SAMPLE_FAQ, WRITES_FAQ
from tests.real_model import require_installed

REPO = Path(__file__).resolve().parents[1]

# Speaks just enough of llama.cpp's server: GET /health (public), GET /v1/models and POST
# /v1/chat/completions (both need the key the supervisor put in GUARDRAG_LLM_SERVER_KEY);
# SIGTERM exits 0, as the real server does.
# Flags: --delay S before listening, --exit N at once (after printing to stderr),
# --pids FILE to append its pid to, --fail-once FILE to exit 1 if FILE exists (removing it).
FAKE_SERVER = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # as the real server does
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    if "--pids" in args:
        with open(args["--pids"], "a") as handle:
            handle.write(f"{os.getpid()}\\n")
    time.sleep(float(args.get("--delay", 0)))
    if os.path.exists(args.get("--fail-once", "")):
        os.remove(args["--fail-once"])
        sys.exit(1)
    if "--exit" in args:
        print("fake server: boom, model file is broken", file=sys.stderr, flush=True)
        sys.exit(int(args["--exit"]))

    KEY = os.environ.get("GUARDRAG_LLM_SERVER_KEY", "")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def authorised(self):
            if KEY and self.headers.get("Authorization") != f"Bearer {KEY}":
                self.send_error(401)
                return False
            return True

        def do_GET(self):
            if self.path == "/health":
                return self.reply({"status": "ok"})
            if self.path != "/v1/models":
                return self.send_error(404)
            if self.authorised():
                self.reply({"object": "list", "data": [{"id": "fake", "object": "model"}]})

        def do_POST(self):
            if not self.authorised():
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.reply({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "fake answer"}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
            })

        def reply(self, payload):
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ThreadingHTTPServer(("127.0.0.1", int(args["--port"])), Handler).serve_forever()
    """
)

# Runs a supervisor in another process: "app" owns the server until stdin closes,
# "serve" is what `guardrag llm start` runs (until SIGTERM).
OWNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from guardrag.config.settings import Settings
    from guardrag.core.llm import local as local_llm
    from guardrag.core.llm.supervisor import LocalServer

    mode, data_dir, script = sys.argv[1:4]
    fake = lambda port: [sys.executable, script, "--port", str(port)]
    settings = Settings(data_dir=Path(data_dir), llm_base_url=None, llm_local=True)
    if mode == "serve":
        local_llm.server_command = lambda s: fake
        sys.exit(local_llm.serve(settings))
    server = LocalServer(fake, local_llm.state_dir(settings), model=settings.llm_local_model)
    print(server.start(), flush=True)
    sys.stdin.read()
    server.stop()
    """
)

MODEL = "qwen2.5-coder-1.5b"
Command = Callable[[int], list[str]]


@pytest.fixture
def fake_script(tmp_path: Path) -> Path:
    path = tmp_path / "fake_llama_server.py"
    path.write_text(FAKE_SERVER)
    return path


@pytest.fixture
def fake(fake_script: Path) -> Callable[..., Command]:
    """fake(*flags) -> a server command that runs the fake server with those flags."""

    def make(*flags: str) -> Command:
        return lambda port: [sys.executable, str(fake_script), "--port", str(port), *flags]

    return make


@pytest.fixture
def servers() -> Iterator[list[LocalServer]]:
    """Servers a test starts, stopped even when it fails."""
    started: list[LocalServer] = []
    yield started
    for server in started:
        server.stop()
    local_llm.stop_all()


def make_server(command: Command, directory: Path, **options: float) -> LocalServer:
    defaults: dict[str, float] = {"start_timeout_s": 15, "backoff_s": 0.05, "poll_s": 0.05}
    return LocalServer(command, directory, model=MODEL, **{**defaults, **options})  # type: ignore[arg-type]


def installed_settings(data_dir: Path, **changes: object) -> Settings:
    """`settings_for` naming the installed local model (where `make llm` put it); skips, or
    fails when the run requires the model, without one."""
    installed = load_settings()
    settings = settings_for(
        data_dir,
        llm_local_model=installed.llm_local_model,
        llm_model_dir=model_path(installed).parent,
        **changes,
    )
    require_installed(settings)
    return settings


def settings_for(data_dir: Path, **changes: object) -> Settings:
    """Settings that ignore any GUARDRAG_* in the environment that would change the outcome."""
    values: dict[str, object] = {
        "data_dir": data_dir,
        "default_kb": KB,
        "llm_base_url": None,
        "llm_local": True,
        "llm_local_model": MODEL,
        "llm_model_dir": None,
    }
    return Settings(**{**values, **changes})  # type: ignore[arg-type]


def wait_for(condition: Callable[[], bool], timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# --- supervisor -----------------------------------------------------------------------------------


def test_start_serves_records_state_and_stop_cleans_up(
    tmp_path: Path, fake: Callable[..., Command]
) -> None:
    with make_server(fake(), tmp_path / "llm") as server:
        url = server.base_url
        assert url and healthy(url) and server.owned
        state = read_state(tmp_path / "llm")
        assert state is not None and state.base_url == url
        assert state.supervisor == os.getpid() and not state.detached and pid_alive(state.pid)
        assert "starting:" in (tmp_path / "llm" / "server.log").read_text()
        # a random key per start, in a file only this user reads, never on the command line
        assert len(state.key) >= 24 and server.api_key == state.key
        assert (tmp_path / "llm" / "server.json").stat().st_mode & 0o777 == 0o600
        assert state.key not in Path(f"/proc/{state.pid}/cmdline").read_text()
    assert not healthy(url) and not pid_alive(state.pid)
    assert read_state(tmp_path / "llm") is None
    server.stop()  # idempotent


def test_each_data_dir_gets_its_own_free_port(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    servers += [make_server(fake(), tmp_path / name) for name in ("a", "b")]
    urls = {server.start() for server in servers}
    assert len(urls) == 2 and all(url.startswith("http://127.0.0.1:") for url in urls)


def test_health_timeout_kills_the_server_and_says_so(
    tmp_path: Path, fake: Callable[..., Command]
) -> None:
    pids = tmp_path / "pids"
    server = make_server(fake("--delay", "60", "--pids", str(pids)), tmp_path, start_timeout_s=1)
    with pytest.raises(LocalServerError, match=r"did not answer .* within 1s"):
        server.start()
    assert not server.owned and read_state(tmp_path) is None
    assert wait_for(lambda: not pid_alive(int(pids.read_text())), 5)


def test_exit_while_starting_reports_code_and_log_tail(
    tmp_path: Path, fake: Callable[..., Command]
) -> None:
    with pytest.raises(LocalServerError, match=r"exited with code 3.*model file is broken"):
        make_server(fake("--exit", "3"), tmp_path).start()


def started(server: LocalServer, servers: list[LocalServer]) -> tuple[str, ServerState]:
    """Start `server` (stopped after the test) and return its URL and recorded state."""
    servers.append(server)
    url = server.start()
    state = read_state(server.directory)
    assert state is not None
    return url, state


def test_crash_is_restarted_on_the_same_port(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    server = make_server(fake(), tmp_path)
    url, first = started(server, servers)
    os.kill(first.pid, signal.SIGKILL)
    assert wait_for(lambda: server.restarts == 1 and healthy(url))
    second = read_state(tmp_path)
    assert second is not None and second.pid != first.pid and second.port == first.port
    assert second.key == first.key  # clients built for the first server keep working


def test_a_server_that_stops_when_asked_is_not_restarted(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    """Ctrl+C on `make run` signals the server too; it exits 0 and stays stopped."""
    server = make_server(fake(), tmp_path)
    url, state = started(server, servers)
    os.kill(state.pid, signal.SIGTERM)
    assert wait_for(lambda: not server.supervising)
    assert server.restarts == 0 and not healthy(url) and read_state(tmp_path) is None


def test_a_failed_restart_is_retried(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    flag = tmp_path / "fail-next-start"
    server = make_server(fake("--fail-once", str(flag)), tmp_path / "llm")
    url, state = started(server, servers)
    flag.touch()
    os.kill(state.pid, signal.SIGKILL)
    assert wait_for(lambda: server.restarts == 1 and healthy(url))
    assert not flag.exists()


def test_gives_up_after_max_restarts(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    server = make_server(fake(), tmp_path, max_restarts=1)
    servers.append(server)
    url = server.start()
    for expected in (1, None):
        state = read_state(tmp_path)
        assert state is not None
        os.kill(state.pid, signal.SIGKILL)
        if expected:
            assert wait_for(lambda: server.restarts == 1 and healthy(url))
    assert wait_for(lambda: not server.supervising)
    assert read_state(tmp_path) is None and not healthy(url)
    assert healthy(server.start())  # asked again later, it starts a fresh server


def test_second_supervisor_attaches_and_leaves_it_running(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    pids = tmp_path / "pids"
    owner, other = (make_server(fake("--pids", str(pids)), tmp_path / "llm") for _ in range(2))
    servers += [owner, other]
    url = owner.start()
    assert other.start() == url and not other.owned
    other.stop()
    assert healthy(url)
    owner.stop()
    assert not healthy(url)
    assert len(pids.read_text().split()) == 1


def test_concurrent_starts_spawn_one_server(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    pids = tmp_path / "pids"
    servers += [make_server(fake("--pids", str(pids)), tmp_path / "llm") for _ in range(3)]
    urls: list[str] = []
    threads = [threading.Thread(target=lambda s=s: urls.append(s.start())) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(urls)) == 1 and len(pids.read_text().split()) == 1
    assert sum(server.owned for server in servers) == 1


def test_orphan_of_a_dead_supervisor_is_replaced(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    port = supervisor.free_port()
    orphan = subprocess.Popen(fake()(port))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert wait_for(lambda: healthy(f"http://127.0.0.1:{port}/v1"))
    state = ServerState(port, orphan.pid, dead.pid, False, MODEL, time.time(), "log")
    (tmp_path / "server.json").write_text(json.dumps(state.__dict__))
    server = make_server(fake(), tmp_path)
    servers.append(server)
    server.start()
    assert orphan.wait(10) is not None and server.owned


def test_a_server_for_another_model_is_reported(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    owner = LocalServer(fake(), tmp_path, model="qwen2.5-coder-0.5b", start_timeout_s=15)
    servers.append(owner)
    owner.start()
    with pytest.raises(
        LocalServerError, match=r"serves qwen2.5-coder-0.5b, not qwen2.5-coder-1.5b"
    ):
        make_server(fake(), tmp_path).start()


def _owner(mode: str, data_dir: Path, script: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", OWNER, mode, str(data_dir), str(script)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_app_owned_server_is_shared_across_processes_and_stops_only_with_force(
    tmp_path: Path, fake_script: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    owner = _owner("app", tmp_path, fake_script)
    try:
        assert owner.stdout is not None
        url = owner.stdout.readline().strip()
        attached = make_server(fake(), tmp_path / "llm")
        servers.append(attached)
        assert attached.start() == url and not attached.owned
        with pytest.raises(LocalServerError, match="supervised by a running guardrag process"):
            stop_server(tmp_path / "llm")
        assert "stopped" in stop_server(tmp_path / "llm", force=True)
        time.sleep(0.8)  # longer than the owner's poll + backoff: it must not restart
        assert not healthy(url) and read_state(tmp_path / "llm") is None
    finally:
        owner.communicate("", timeout=20)
    assert owner.returncode == 0


def test_detached_supervisor_stops_on_request(tmp_path: Path, fake_script: Path) -> None:
    supervisor = _owner("serve", tmp_path, fake_script)
    try:
        assert wait_for(
            lambda: (s := read_state(tmp_path / "llm")) is not None and healthy(s.base_url)
        )
        state = read_state(tmp_path / "llm")
        assert state is not None and state.detached and state.supervisor == supervisor.pid
        assert "stopped" in stop_server(tmp_path / "llm")
        assert supervisor.wait(20) == 0
        assert not pid_alive(state.pid) and read_state(tmp_path / "llm") is None
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
    assert stop_server(tmp_path / "llm") == "the local model server is not running"


# --- load_chat_model ------------------------------------------------------------------------------


def test_no_model_installed_means_no_llm_and_one_hint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path)
    with caplog.at_level(logging.WARNING, logger="guardrag.llm"):
        assert load_chat_model(settings) is None
        assert load_chat_model(settings) is None
    hints = [r.getMessage() for r in caplog.records if "make llm" in r.getMessage()]
    assert len(hints) == 1 and "GUARDRAG_LLM_BASE_URL is unset" in hints[0]
    assert not (tmp_path / "llm" / "server.json").exists()
    reason = unavailable_reason(settings)  # what the UI shows
    assert reason and "not installed" in reason and "make llm" in reason


def test_local_model_off_means_no_llm(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_for(tmp_path, llm_local=False)
    with caplog.at_level(logging.WARNING, logger="guardrag.llm"):
        assert load_chat_model(settings) is None
    assert not caplog.records
    assert "GUARDRAG_LLM_LOCAL=false" in str(unavailable_reason(settings))


def test_a_server_that_will_not_start_is_explained(
    tmp_path: Path,
    fake: Callable[..., Command],
    monkeypatch: pytest.MonkeyPatch,
    servers: list[LocalServer],
) -> None:
    monkeypatch.setattr(local_llm, "install_problem", lambda settings: None)
    monkeypatch.setattr(local_llm, "server_command", lambda settings: fake("--exit", "3"))
    settings = settings_for(tmp_path)
    assert load_chat_model(settings) is None
    reason = unavailable_reason(settings)
    assert reason and "did not start" in reason and "model file is broken" in reason


def test_load_chat_model_talks_to_the_supervised_local_server(
    tmp_path: Path,
    fake: Callable[..., Command],
    monkeypatch: pytest.MonkeyPatch,
    servers: list[LocalServer],
) -> None:
    monkeypatch.setattr(local_llm, "install_problem", lambda settings: None)
    monkeypatch.setattr(local_llm, "server_command", lambda settings: fake())
    settings = settings_for(tmp_path)
    chat = load_chat_model(settings)
    assert chat is not None
    reply = chat.invoke("How do I top up?")  # the fake answers 401 without the server's key
    assert reply.content == "fake answer"
    assert getattr(chat, "model_name", None) == MODEL
    assert getattr(chat, "max_retries", None) == 0  # the supervisor restarts, not the client
    assert getattr(chat, "request_timeout", None) == LOCAL_TIMEOUT_S  # the timeout was not set
    state = read_state(tmp_path / "llm")
    assert state is not None and str(state.port) in str(getattr(chat, "openai_api_base", ""))
    target = local_endpoint(settings)
    assert target is not None and target.api_key == state.key and target.local


def test_local_timeout_is_longer_unless_set(tmp_path: Path) -> None:
    """A CPU-bound local answer gets LOCAL_TIMEOUT_S unless GUARDRAG_LLM_TIMEOUT_S says else;
    a remote endpoint keeps the setting's default."""
    default = settings_for(tmp_path)
    assert timeout_s(default, local=True) == LOCAL_TIMEOUT_S
    assert timeout_s(default, local=False) == default.llm_timeout_s
    chosen = settings_for(tmp_path, llm_timeout_s=10)
    assert timeout_s(chosen, local=True) == 10


def test_server_command_runs_the_prebuilt_server_with_all_cores(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, llm_threads=3, llm_ctx=2048, llm_parallel=2)
    argv = local_llm.server_command(settings)(8123)
    assert argv[1:3] == ["-m", "guardrag.core.llm.server"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert options["--port"] == "8123" and options["--threads"] == "3"
    assert options["--ctx"] == "2048" and options["--parallel"] == "2"
    assert options["--cache-mib"] == str(settings.llm_cache_mib)
    assert options["--model"] == str(tmp_path / "models" / f"{MODEL}.gguf")
    assert local_llm.server_for(settings).env["OMP_WAIT_POLICY"] == "PASSIVE"


def test_the_demo_says_why_generated_answers_are_off(
    tmp_path: Path, sample_store: VectorStore, embedder: OnnxEmbedder
) -> None:
    """No model installed: the app still starts, and its UI says why answers are refused."""
    from guardrag.faces.service import build_services
    from guardrag.faces.ui.app import build_app

    settings = settings_for(tmp_path)
    # Not closed: that would close the session's shared sample store.
    bot = Guardrag(build_services(settings, store=sample_store, embedder=embedder), settings)
    assert bot.services.chat_model is None
    page = json.dumps(build_app(bot).config, default=str)
    assert "Generated answers are off" in page and "not installed" in page
    assert "make llm" in page


# --- guardrag llm -------------------------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no .env from the repo
    for name in ("LLM_BASE_URL", "LLM_LOCAL", "LLM_MODEL_DIR", "LLM_LOCAL_MODEL"):
        monkeypatch.delenv(f"GUARDRAG_{name}", raising=False)
    monkeypatch.setenv("GUARDRAG_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_cli_without_a_model_says_how_to_install(cli_env: Path) -> None:
    runner = CliRunner()
    status = runner.invoke(llm_app, ["status"])
    assert status.exit_code == 0 and "make llm" in status.output
    start = runner.invoke(llm_app, ["start"])
    assert start.exit_code == 2 and "make llm" in start.output
    stop = runner.invoke(llm_app, ["stop"])
    assert stop.exit_code == 0 and "not running" in stop.output


def test_cli_status_shows_a_configured_endpoint(
    cli_env: Path,
    fake: Callable[..., Command],
    servers: list[LocalServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = make_server(fake(), cli_env / "elsewhere")
    servers.append(server)
    monkeypatch.setenv("GUARDRAG_LLM_BASE_URL", server.start())
    monkeypatch.setenv("GUARDRAG_LLM_MODEL", "my-model")
    monkeypatch.setenv("GUARDRAG_LLM_API_KEY", server.api_key)
    status = CliRunner().invoke(llm_app, ["status"])
    assert status.exit_code == 0, status.output
    assert str(server.base_url) in status.output and "my-model" in status.output
    assert "answers GET /models" in status.output


def test_cli_status_shows_the_running_local_server(
    cli_env: Path,
    fake: Callable[..., Command],
    servers: list[LocalServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_llm, "install_problem", lambda settings: None)
    server = make_server(fake(), cli_env / "llm")
    servers.append(server)
    url = server.start()
    status = CliRunner().invoke(llm_app, ["status"])
    assert status.exit_code == 0, status.output
    assert (
        url in status.output
        and "up, pid" in status.output
        and "a guardrag process" in status.output
    )


# --- the real model, end to end -------------------------------------------------------------------


@pytest.fixture
def real_bot(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Guardrag]:
    """The real pipeline on the sample KB with the installed local model behind it."""
    settings = installed_settings(tmp_path, llm_timeout_s=120, llm_max_retries=0)
    from guardrag.core.kb.ingest import ingest
    from guardrag.core.store import open_store
    from guardrag.faces.service import build_services

    embedder: OnnxEmbedder = request.getfixturevalue("embedder")  # loaded only when not skipped
    store = open_store(tmp_path, None, None)
    ingest(store, embedder, KB, [SAMPLE_FAQ], description="Kinetic Wallet")
    bot = Guardrag(build_services(settings, store=store, embedder=embedder), settings)
    try:
        yield bot
    finally:
        bot.close()
        local_llm.stop_all()
    assert read_state(tmp_path / "llm") is None  # stopped with the app


#: Straight to generation: an unsure match is not first asked again in other words, and the
#: model may write from it.
TO_GENERATION = {**WRITES_FAQ, "rephrase_unsure": False}


#: The golden question `generated_question` found; every real-model test ingests the same KB.
_generated: list[str] = []


def generated_question(bot: Guardrag) -> str:
    """A golden question that needs the LLM today (the router's thresholds move): found once
    per session by asking the golden set without a model, which takes a while on 2 cores."""
    if _generated:
        return _generated[0]
    no_llm = bot.with_services(chat_model=None)
    question = next(
        (
            case.question
            for case in load_cases(REPO / "datasets/ewallet/golden.jsonl")
            if case.expect == "answer"
            and (refusal := no_llm.ask(case.question, knobs=TO_GENERATION).refusal) is not None
            and refusal.stage == "generate"
        ),
        None,
    )
    assert question is not None, "no golden question reaches generation"
    _generated.append(question)
    return question


def model_answered(result: Result) -> bool:
    generate = [step for step in result.trail if step.node == "generate"]
    assert generate, f"did not reach generation: {result.trail}"
    return generate[0].verdict in ("pass", "miss") and result.usage.completion_tokens > 0


@pytest.mark.slow
def test_real_local_model_answers_through_the_pipeline(real_bot: Guardrag) -> None:
    """Asks the real model a golden question that needs generation."""
    result = real_bot.ask(generated_question(real_bot), knobs=TO_GENERATION)
    assert model_answered(result), result.trail


@pytest.mark.slow
def test_real_local_model_rewrites_a_follow_up(real_bot: Guardrag) -> None:
    """The real model turns a follow-up into a standalone question the KB can answer."""
    first = real_bot.ask("Are there any fees for topping up?", thread_id="real")
    assert first.outcome == "answered"
    follow_up = real_bot.ask("and what is the minimum amount?", thread_id="real")
    rewrite = next(d for d in follow_up.trail if d.node == "contextualize")
    assert rewrite.reason == "follow-up rewritten (llm)", rewrite
    standalone = str(rewrite.detail["standalone"]).lower()
    assert "top" in standalone and "minimum" in standalone, standalone
    assert follow_up.outcome == "answered", follow_up.trail
    assert "kw-top-up-003" in [c.source_id for c in follow_up.citations]


@pytest.mark.slow
def test_real_server_killed_mid_answer_is_refused_then_restarted(
    real_bot: Guardrag, tmp_path: Path
) -> None:
    """kill -9 of the model server while it generates: that question is refused
    llm_unavailable at once (not after the 120 s timeout), the supervisor brings the server
    back on the same port with the same key, and the next question is answered."""
    question = generated_question(real_bot)
    state = read_state(tmp_path / "llm")
    assert state is not None and healthy(state.base_url)
    killed_at: list[float] = []

    def kill_when_generating(node: str, update: dict[str, object]) -> None:
        if node == "rerank":  # the next node is generate: let it send its request first
            time.sleep(0.5)
            os.kill(state.pid, signal.SIGKILL)
            killed_at.append(time.monotonic())

    result = real_bot.ask(question, knobs=TO_GENERATION, on_step=kill_when_generating)
    assert killed_at, "the question never reached generation"
    assert result.refusal is not None and result.refusal.reason.value == "llm_unavailable"
    assert result.refusal.kind == "error", result.refusal
    assert time.monotonic() - killed_at[0] < 15  # a dropped connection, not the 120 s timeout

    def restarted() -> bool:
        now = read_state(tmp_path / "llm")
        return now is not None and now.pid != state.pid and healthy(now.base_url)

    assert wait_for(restarted, 120), (tmp_path / "llm" / "server.log").read_text()[-2000:]
    after = read_state(tmp_path / "llm")
    assert after is not None and (after.port, after.key) == (state.port, state.key)
    again = real_bot.ask(question, knobs=TO_GENERATION)
    assert model_answered(again), f"not answered after the restart: {again.trail}"
