"""The HTTP API: guardrag's own /v1 routes and an OpenAI-compatible face behind the same keys,
limits and audit; probes; offline docs; the Gradio UI mounted at /ui.

app (the application), middleware (request ids, the body gate, no keys in URLs), auth (keys
and rate limits), bodies (schemas and documented errors), ask (/v1/ask, /v1/ask/stream,
/v1/kbs, /v1/audit), openai (/v1/chat/completions, /v1/models), stream (progress from a
worker thread), docs (Swagger UI and ReDoc offline).
"""

from guardrag.faces.api.app import create_app
from guardrag.faces.api.middleware import API_PREFIX, UI_PATH

__all__ = ["API_PREFIX", "UI_PATH", "create_app"]
