"""Fakes that record: a scripted chat model (queued replies, call history, usage) and an
embedder wrapper that records what it was asked to embed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from guardrag.config import prompts

if TYPE_CHECKING:
    import numpy as np

    from guardrag.core.embedder import Embedder


class ScriptedChatModel(BaseChatModel):
    """Replies with queued strings (or raises queued exceptions) and records every prompt.

    `rephrase` asks have their own queue, `rephrasings`, and record, `rephrase_calls`; with none
    queued the model says the customer's message again with a plain lead-in ("Please tell me:
    ..."), a second wording that ranks like the first, so tests scripted for `generate` need not
    know of it. `judge_passages` asks likewise have `judgements` and `judge_calls`; with none
    queued the judge chooses the first passage; the answer judge's (`answer_judgements`,
    `answer_judge_calls`) says YES.
    """

    replies: list[str | Exception] = Field(default_factory=list)
    rephrasings: list[str | Exception] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    rephrase_calls: list[list[BaseMessage]] = Field(default_factory=list)
    judgements: list[str | Exception] = Field(default_factory=list)
    judge_calls: list[list[BaseMessage]] = Field(default_factory=list)
    answer_judgements: list[str | Exception] = Field(default_factory=list)
    answer_judge_calls: list[list[BaseMessage]] = Field(default_factory=list)

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
        if messages and messages[0].content == prompts.REPHRASE_SYSTEM:
            self.rephrase_calls.append(messages)
            asked = str(messages[-1].content).rpartition("Message: ")[2]
            reply = self.rephrasings.pop(0) if self.rephrasings else f"Please tell me: {asked}"
        elif messages and messages[0].content == prompts.PASSAGE_JUDGE_SYSTEM:
            self.judge_calls.append(messages)
            reply = self.judgements.pop(0) if self.judgements else "1"
        elif messages and messages[0].content == prompts.ANSWER_JUDGE_SYSTEM:
            self.answer_judge_calls.append(messages)
            reply = self.answer_judgements.pop(0) if self.answer_judgements else "YES"
        else:
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


class Recording:
    """An embedder (the real one, in tests that need real vectors), recording every text it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.dim = inner, inner.dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return self.inner.embed(texts)
