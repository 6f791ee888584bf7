"""One operator sign-in per browser session: the Audit and Knowledge base tabs and the Why?
panel read it, instead of each asking for the admin token again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr
from pydantic import SecretStr

from guardrag.faces.ui.common import DEMO_RULE, DENIED, token_ok

SIGNED_IN = "Signed in as operator for this browser session."
SIGNED_OUT = "Signed out."


@dataclass
class Operator:
    """The session's operator token (kept server-side, per browser session, only once it was
    right) and the events after which operator views should refresh."""

    session: gr.State
    expected: SecretStr | None
    changed: list[Any]

    def ok(self, session_value: str | None) -> bool:
        return token_ok(self.expected, session_value)

    def then(self, fn: Any, inputs: Any = None, outputs: Any = None) -> None:
        """Run `fn` after each sign-in or sign-out (to show or hide operator data)."""
        for event in self.changed:
            event.then(fn, inputs=inputs, outputs=outputs)


def sign_in(expected: SecretStr | None, given: str | None) -> tuple[str, str, str]:
    """(session value, status line, cleared token box): the token is kept only when right;
    an empty or wrong one is a plain refusal."""
    if token_ok(expected, given):
        return str(given), SIGNED_IN, ""
    return "", DENIED, ""


def sign_in_row(expected: SecretStr | None) -> Operator:
    session = gr.State("")
    if expected is None:
        gr.Markdown(DEMO_RULE, elem_id="sign-in-disabled")
        return Operator(session, expected, [])
    with gr.Accordion("Operator sign-in", open=False, elem_id="sign-in"):
        with gr.Row():
            token = gr.Textbox(label="Admin token", type="password", elem_id="admin-token", scale=3)
            enter = gr.Button("Sign in", elem_id="sign-in-button", scale=1)
            leave = gr.Button("Sign out", elem_id="sign-out-button", scale=1)
        status = gr.Markdown(elem_id="sign-in-status")

    def on_sign_in(given: str | None) -> tuple[str, str, str]:
        return sign_in(expected, given)

    changed = [
        enter.click(on_sign_in, inputs=[token], outputs=[session, status, token]),
        token.submit(on_sign_in, inputs=[token], outputs=[session, status, token]),
        leave.click(lambda: ("", SIGNED_OUT, ""), outputs=[session, status, token]),
    ]
    return Operator(session, expected, changed)
