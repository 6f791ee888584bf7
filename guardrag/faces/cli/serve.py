"""`guardrag serve`: the HTTP API with the Gradio app at /ui, in one process over one Guardrag.

Registered on the main Typer app in guardrag/faces/cli/main.py.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Annotated

import typer

from guardrag.config.settings import Settings, SettingsError, load_settings

log = logging.getLogger("guardrag.serve")


def ui_enabled(settings: Settings, ui: bool | None) -> bool:
    """Whether to mount the UI. By default not when API keys guard /v1: the UI answers on
    every KB for anyone who reaches it, which would undo the keys' scopes."""
    if ui is not None:
        return ui
    return not settings.key_scopes()


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
) -> None:
    """Serve the HTTP API (/v1, /health, /ready, /docs) and the UI (/ui) until interrupted."""
    # lazy: the web server and the pipeline load only for this command
    import uvicorn

    from guardrag.faces.api import create_app  # lazy: see above
    from guardrag.faces.service import Guardrag  # lazy: see above

    logging.basicConfig(level=logging.INFO)
    settings = load_settings()
    bind = host or settings.host
    check_open_api(settings, bind, insecure_open)
    # One Guardrag per process: the embedded Qdrant shard admits one process at a time.
    with_ui = ui_enabled(settings, ui)
    if not with_ui and ui is None:
        log.info("API keys are configured: the UI is not mounted (--ui mounts it anyway)")
    bot = Guardrag.from_settings(settings, source="api")
    bot.warm_up()
    try:
        uvicorn.run(
            create_app(bot, with_ui=with_ui),
            host=bind,
            port=port or settings.port,
            server_header=False,
            log_level="info",
        )
    finally:
        bot.close()
