"""The one place chat models are built: any OpenAI-compatible endpoint through ChatOpenAI."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from config.settings import Settings


def load_chat_model(settings: Settings, max_tokens: int = 300) -> BaseChatModel | None:
    """ChatOpenAI at GUARDRAG_LLM_BASE_URL, or None when no endpoint is configured.

    None makes `generate` refuse with llm_unavailable instead of guessing.
    """
    if not settings.llm_base_url:
        return None
    from langchain_openai import ChatOpenAI

    api_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
    return ChatOpenAI(
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=api_key,
        temperature=0,
        max_tokens=max_tokens,
        timeout=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        stream_usage=True,
    )
