"""Where the UI keeps uploaded files: the project's own data dir, cleaned up.

Gradio stores every upload in its temp folder before any handler runs (a file is on disk
even when the upload is then refused). That folder is <data_dir>/ui-uploads unless the
operator set GRADIO_TEMP_DIR; the app deletes what it holds after an hour (Blocks'
delete_cache, and entirely at restart), and an ingest deletes its upload once staged.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from guardrag.config.settings import Settings

#: (every how many seconds, files older than how many seconds) Gradio's cache is swept.
SWEEP = (600, 3600)
_ENV = "GRADIO_TEMP_DIR"
_set_by_us: set[str] = set()


def upload_dir(settings: Settings) -> Path:
    """The folder for uploads, created owner-only and named to Gradio (which reads it from
    the environment when it starts and when it checks a file)."""
    current = os.environ.get(_ENV)
    if current and current not in _set_by_us:  # the operator's choice
        return Path(current)
    folder = (settings.data_dir / "ui-uploads").resolve()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ[_ENV] = str(folder)
    _set_by_us.add(str(folder))
    return folder


def discard(path: str | os.PathLike[str] | None) -> None:
    """Delete an upload that has been dealt with (never anything outside the upload folder)."""
    if not path:
        return
    folder = os.environ.get(_ENV)
    file = Path(path).resolve()
    if folder and file.is_relative_to(Path(folder).resolve()):
        with contextlib.suppress(OSError):
            file.unlink()


class NoUploadsMiddleware:
    """Without an admin token nobody may ingest, so nobody may upload a file either: Gradio's
    upload route (under `prefix`) would otherwise take files from anyone who reaches the UI."""

    def __init__(self, app: Any, prefix: str = "") -> None:
        self.app = app
        self.route = f"{prefix}/gradio_api/upload"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and str(scope["path"]).startswith(self.route):
            body = json.dumps({"detail": "uploads are disabled (no admin token)"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
