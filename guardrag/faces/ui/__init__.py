"""The Gradio UI: app.py wires the tabs (chat.py, audit.py, kbs.py) over one Guardrag."""

from guardrag.faces.ui.app import CSS, build_app, main

__all__ = ["CSS", "build_app", "main"]
