"""The one place chat models are built: any OpenAI-compatible endpoint through ChatOpenAI.

That endpoint is GUARDRAG_LLM_BASE_URL when set (OpenAI, vLLM, Ollama, ...), else the bundled
local model's server, which `guardrag.core.llm.local` starts and supervises on 127.0.0.1.
Both are reached the same way; only the URL, key and model name differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from guardrag.config.settings import Settings
from guardrag.core.llm import local

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint: `base_url` ends in /v1 for the protocol's routes."""

    base_url: str
    api_key: str
    model: str
    local: bool  # the bundled llama.cpp server: its native routes (/completion, ...) exist too

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/").removesuffix("/v1")


#: The bundled model's per-call timeout when GUARDRAG_LLM_TIMEOUT_S is not set: its answers are
#: CPU-bound, and on a busy 2-core machine one can take a minute (measured: 30-90 s under load
#: average 10-25), where the remote default of 30 s would throw the work away and refuse. A
#: dead local server fails at once whatever the timeout.
LOCAL_TIMEOUT_S = 120.0


def timeout_s(settings: Settings, local: bool) -> float:
    """The per-call timeout: GUARDRAG_LLM_TIMEOUT_S when set, else its default, raised to
    LOCAL_TIMEOUT_S for the bundled server."""
    if local and "llm_timeout_s" not in settings.model_fields_set:
        return max(settings.llm_timeout_s, LOCAL_TIMEOUT_S)
    return settings.llm_timeout_s


def model_name(settings: Settings) -> str:
    """The model answering questions under these settings (for pricing and the trail)."""
    return settings.llm_model if settings.llm_base_url else settings.llm_local_model


def local_endpoint(settings: Settings) -> Endpoint | None:
    """The bundled model's server for these settings, started if need be; None when there is
    none (`unavailable_reason` says why)."""
    server = local.local_server(settings)
    if server is None or server.base_url is None:
        return None
    key = server.api_key or "not-needed"  # a server started without a key takes any
    return Endpoint(server.base_url, key, settings.llm_local_model, local=True)


def endpoint(settings: Settings) -> Endpoint | None:
    """The configured endpoint, else the local model's server; None when there is neither."""
    if settings.llm_base_url:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
        return Endpoint(settings.llm_base_url, key, settings.llm_model, local=False)
    return local_endpoint(settings)


def unavailable_reason(settings: Settings) -> str | None:
    """Why these settings give no chat model, in a sentence for the operator; None when they
    do (or were not asked for one yet)."""
    if settings.llm_base_url:
        return None
    problem = local.problem(settings)
    return f"no language model: GUARDRAG_LLM_BASE_URL is unset and {problem}" if problem else None


def load_chat_model(settings: Settings, max_tokens: int = 300) -> BaseChatModel | None:
    """ChatOpenAI at the configured endpoint or the local server; None when there is neither.

    None makes `generate` refuse with llm_unavailable instead of guessing; the reason has
    been logged and `unavailable_reason` repeats it.
    """
    target = endpoint(settings)
    if target is None:
        return None
    from langchain_openai import (
        ChatOpenAI,  # lazy: 0.7 s to import; commands and processes without a model skip it
    )

    return ChatOpenAI(
        model=target.model,
        base_url=target.base_url,
        api_key=target.api_key,
        temperature=0,
        max_tokens=max_tokens,
        timeout=timeout_s(settings, target.local),
        # The local server's supervisor restarts it after a crash: retrying against its dead
        # port only delays the refusal by the retries' backoff.
        max_retries=0 if target.local else settings.llm_max_retries,
        stream_usage=True,
    )
