"""`guardrag serve`: the HTTP API with the Gradio app at /ui, over one Guardrag per process.

One process by default. `--workers N` runs N uvicorn worker processes on one port, each
building its own Guardrag from the environment (`worker_app`, a factory uvicorn calls in every
worker; nothing is opened in the supervisor, so no file, socket or lock crosses a fork). With
embedded Qdrant Edge each worker serves its own copy of the published shards
(GUARDRAG_EDGE_SOURCE_DIR defaults to DATA_DIR for them). Registered on the main Typer app in
guardrag/faces/cli/main.py.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from guardrag.config.settings import Settings, SettingsError, load_settings
from guardrag.faces.startup import resume

if TYPE_CHECKING:
    from fastapi import FastAPI

    from guardrag.faces.service import Guardrag

log = logging.getLogger("guardrag.serve")

#: How the supervisor tells its workers whether to mount the UI (not a user setting).
_UI_ENV = "GUARDRAG_SERVE_WORKER_UI"


def ui_enabled(settings: Settings, ui: bool | None) -> bool:
    """Whether to mount the UI. By default not when API keys guard /v1: the UI answers on
    every KB for anyone who reaches it, which would undo the keys' scopes."""
    if ui is not None:
        return ui
    return not settings.key_scopes()


def ui_notice(settings: Settings, with_ui: bool, workers: int, base_url: str) -> str:
    """One console line at start-up: where the UI is, or why it is not mounted and how to
    have it."""
    if with_ui:
        return f"guardrag: the UI is at {base_url}/ui (the API at {base_url}/v1, docs at /docs)"
    if workers > 1:
        return (
            f"guardrag: the UI is not mounted: it keeps each browser session in one process and "
            f"--workers is {workers}. Serve it with --workers 1, or alone with `python app.py`."
        )
    if settings.key_scopes():
        return (
            "guardrag: the UI is not mounted at /ui because API keys are set "
            "(GUARDRAG_API_KEY/GUARDRAG_API_KEYS): it would answer on every KB for anyone who "
            "reaches it. To have both, add --ui (the UI then needs no key; set "
            "GUARDRAG_ADMIN_TOKEN for its operator views), or run the UI on its own on "
            "127.0.0.1 with `python app.py`."
        )
    return "guardrag: the UI is not mounted (--no-ui)"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`: reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_open_api(settings: Settings, host: str, insecure_open: bool) -> None:
    """Refuse to serve an API without keys on an interface other machines can reach."""
    if is_loopback(host) or insecure_open:
        return
    if settings.api_key is None and not settings.key_scopes():
        raise SettingsError(
            f"refusing to serve on {host} without API keys: anyone who reaches it could ask "
            "every knowledge base and read the audit. Set GUARDRAG_API_KEY or "
            "GUARDRAG_API_KEYS, bind 127.0.0.1, or pass --insecure-open if a proxy in front "
            "of it does the authentication."
        )


def check_workers(settings: Settings, workers: int, ui: bool | None) -> bool:
    """Whether N workers mount the UI, refusing what cannot work across processes."""
    if workers == 1:
        return ui_enabled(settings, ui)
    if ui:
        raise SettingsError(
            "--ui needs --workers 1: the UI keeps each browser session in one process's "
            "memory; serve it from a single-worker replica (with sticky sessions at the proxy)"
        )
    if not settings.redis_url:
        log.warning(
            "rate limits are per worker: a client may get up to %d times "
            "GUARDRAG_RATE_LIMIT_PER_MINUTE; set GUARDRAG_REDIS_URL to share them",
            workers,
        )
    return False


def worker_app() -> FastAPI:
    """The app of one worker process, built from the environment (uvicorn's factory)."""
    # lazy: the web framework and the pipeline load in the workers only
    from guardrag.faces.api import create_app
    from guardrag.faces.service import Guardrag  # lazy: see above

    settings = load_settings()
    bot = Guardrag.from_settings(settings, source="api")
    bot.warm_up()
    app = create_app(bot, with_ui=os.environ.get(_UI_ENV) == "1")
    close_on_shutdown(app, bot)
    return app


def close_on_shutdown(app: FastAPI, bot: Guardrag) -> None:
    """Close `bot` (audit queue, conversation pool, index copies) when the worker stops."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        async with inner(application) as state:
            yield state
        bot.close()

    app.router.lifespan_context = lifespan


def serve(
    host: Annotated[
        str | None, typer.Option(help="Interface to bind (default GUARDRAG_HOST, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Port (default GUARDRAG_PORT, 7860)."),
    ] = None,
    ui: Annotated[
        bool | None,
        typer.Option(
            "--ui/--no-ui",
            help="Mount the UI at /ui (default: yes, unless API keys are configured).",
        ),
    ] = None,
    insecure_open: Annotated[
        bool,
        typer.Option(
            "--insecure-open",
            help="Serve without API keys on a non-loopback interface (behind an "
            "authenticating proxy only).",
        ),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="Worker processes on this port (API only; each has its own copy of embedded "
            "KBs). See docs/DEPLOY.md.",
        ),
    ] = 1,
) -> None:
    """Serve the HTTP API (/v1, /health, /ready, /docs) and the UI (/ui) until interrupted."""
    # lazy: the web server and the pipeline load only for this command
    import uvicorn

    logging.basicConfig(level=logging.INFO)
    settings = load_settings()
    bind = host or settings.host
    check_open_api(settings, bind, insecure_open)
    with_ui = check_workers(settings, workers, ui)
    options: dict[str, Any] = {
        "host": bind,
        "port": port or settings.port,
        "server_header": False,
        "log_level": "info",
    }
    shown_host = f"[{bind}]" if ":" in bind else bind
    base_url = f"http://{shown_host}:{options['port']}"
    typer.echo(ui_notice(settings, with_ui, workers, base_url), err=True)
    if workers > 1:
        os.environ[_UI_ENV] = "0"
        if not settings.qdrant_url and settings.edge_source_dir is None:
            # Embedded Edge admits one process per shard: each worker follows DATA_DIR.
            os.environ["GUARDRAG_EDGE_SOURCE_DIR"] = str(settings.data_dir)
        resume()
        uvicorn.run(f"{__name__}:worker_app", factory=True, workers=workers, **options)
        return

    from guardrag.faces.api import create_app  # lazy: see above
    from guardrag.faces.service import Guardrag  # lazy: see above

    # One Guardrag per process: an embedded Qdrant shard admits one process at a time.
    bot = Guardrag.from_settings(settings, source="api")
    bot.warm_up()
    try:
        web = create_app(bot, with_ui=with_ui)
        resume()
        uvicorn.run(web, **options)
    finally:
        bot.close()
