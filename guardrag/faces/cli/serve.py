"""`guardrag serve`: the HTTP API with the Gradio app at /ui, in one process over one Guardrag.

Registered on the main Typer app in guardrag/cli.py: `app.command()(serve)`.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from guardrag.config.settings import Settings, load_settings

log = logging.getLogger("guardrag.serve")


def ui_enabled(settings: Settings, ui: bool | None) -> bool:
    """Whether to mount the UI. By default not when API keys guard /v1: the UI answers on
    every KB for anyone who reaches it, which would undo the keys' scopes."""
    if ui is not None:
        return ui
    return not settings.key_scopes()


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
) -> None:
    """Serve the HTTP API (/v1, /health, /ready, /docs) and the UI (/ui) until interrupted."""
    import uvicorn

    from guardrag.faces.api import create_app
    from guardrag.faces.service import Guardrag

    logging.basicConfig(level=logging.INFO)
    settings = load_settings()
    # One Guardrag per process: the embedded Qdrant shard admits one process at a time.
    with_ui = ui_enabled(settings, ui)
    if not with_ui and ui is None:
        log.info("API keys are configured: the UI is not mounted (--ui mounts it anyway)")
    bot = Guardrag.from_settings(settings, source="api")
    bot.warm_up()
    try:
        uvicorn.run(
            create_app(bot, with_ui=with_ui),
            host=host or settings.host,
            port=port or settings.port,
            server_header=False,
            log_level="info",
        )
    finally:
        bot.close()
