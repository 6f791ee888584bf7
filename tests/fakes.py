"""Fakes that record: a scripted chat model (queued replies, call history, usage)."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class ScriptedChatModel(BaseChatModel):
    """Replies with queued strings (or raises queued exceptions) and records every prompt."""

    replies: list[str | Exception] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(messages)
        if not self.replies:
            raise AssertionError("ScriptedChatModel: no reply queued for this call")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        usage = {
            "input_tokens": 100,
            "output_tokens": len(reply.split()),
            "total_tokens": 100 + len(reply.split()),
        }
        message = AIMessage(content=reply, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def prompt_text(self, call: int = -1) -> str:
        return "\n".join(str(m.content) for m in self.calls[call])
