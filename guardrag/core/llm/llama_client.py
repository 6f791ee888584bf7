"""ChatOpenAI for llama-cpp-python's OpenAI-compatible server (the bundled local model)."""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI


class LlamaCppChatOpenAI(ChatOpenAI):
    """langchain-openai sends the completion cap as `max_completion_tokens`; llama-cpp-python's
    server reads only `max_tokens` and would otherwise generate to the end of the context."""

    def _get_request_payload(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(*args, **kwargs)
        if "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        return payload
