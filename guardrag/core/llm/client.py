"""The one place chat models are built: any OpenAI-compatible endpoint through ChatOpenAI.

That endpoint is GUARDRAG_LLM_BASE_URL when set (OpenAI, vLLM, Ollama, ...), else the bundled
local model's server, which `guardrag.core.llm.local` starts and supervises on 127.0.0.1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from guardrag.config.settings import Settings

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def model_name(settings: Settings) -> str:
    """The model answering questions under these settings (for pricing and the trail)."""
    return settings.llm_model if settings.llm_base_url else settings.llm_local_model


def load_chat_model(settings: Settings, max_tokens: int = 300) -> BaseChatModel | None:
    """ChatOpenAI at the configured endpoint or the local server; None when there is neither.

    None makes `generate` refuse with llm_unavailable instead of guessing; when the local
    model is missing, `local_endpoint` has logged how to install it.
    """
    from langchain_openai import (
        ChatOpenAI,  # lazy: slow to import; commands without a model skip it
    )

    base_url, chat_class = settings.llm_base_url, ChatOpenAI
    if not base_url:
        from guardrag.core.llm.llama_client import LlamaCppChatOpenAI  # lazy: with ChatOpenAI
        from guardrag.core.llm.local import local_endpoint  # lazy: only for the local model

        base_url, chat_class = local_endpoint(settings), LlamaCppChatOpenAI
        if not base_url:
            return None
    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
    return chat_class(
        model=model_name(settings),
        base_url=base_url,
        api_key=api_key,
        temperature=0,
        max_tokens=max_tokens,
        timeout=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        stream_usage=True,
    )
