"""`guardrag serve`: the HTTP API with the Gradio app at /ui, in one process over one Guardrag.

Registered on the main Typer app in guardrag/cli.py: `app.command()(serve)`.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from config.settings import load_settings


def serve(
    host: Annotated[
        str | None, typer.Option(help="Interface to bind (default GUARDRAG_HOST, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Port (default GUARDRAG_PORT, 7860)."),
    ] = None,
) -> None:
    """Serve the HTTP API (/v1, /health, /ready, /docs) and the UI (/ui) until interrupted."""
    import uvicorn

    from guardrag.api import create_app
    from guardrag.service import Guardrag

    logging.basicConfig(level=logging.INFO)
    settings = load_settings()
    # One Guardrag per process: the embedded Qdrant shard admits one process at a time.
    bot = Guardrag.from_settings(settings, source="api")
    try:
        uvicorn.run(
            create_app(bot),
            host=host or settings.host,
            port=port or settings.port,
            server_header=False,
            log_level="info",
        )
    finally:
        bot.close()
