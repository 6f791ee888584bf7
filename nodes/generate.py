"""generate: asks the chat model to answer from the reranked passages, citing them as [n].

Refuses llm_unavailable when no model is configured or the call fails (timeout, HTTP error,
empty output), and no_relevant_docs when the model itself says the passages don't answer.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from config import prompts
from config.pricing import estimate_cost
from graph.state import Candidate, PipelineState
from guardrag.contract import RefusalReason, Usage
from nodes.common import NodeRuntime, decide, refuse_with

NODE = "generate"


def format_passages(passages: list[Candidate]) -> str:
    return "\n\n".join(
        prompts.PASSAGE_BLOCK.format(
            number=number,
            source_id=p.payload.get("source_id", p.id),
            text=f"{p.payload.get('title', '')}\n{p.payload.get('text', '')}".strip(),
        )
        for number, p in enumerate(passages, start=1)
    )


def build_messages(question: str, passages: list[Candidate], kb_title: str) -> list[Any]:
    return [
        SystemMessage(prompts.ANSWER_SYSTEM.format(kb_title=kb_title, no_answer=prompts.NO_ANSWER)),
        HumanMessage(
            prompts.ANSWER_USER.format(passages=format_passages(passages), question=question)
        ),
    ]


def generate(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    services = runtime.context
    if services.chat_model is None:
        decision = decide(NODE, "error", "no LLM endpoint configured (GUARDRAG_LLM_BASE_URL)")
        return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision)
    info = services.store.kb_info(state["kb"])
    kb_title = info.description if info and info.description else state["kb"]
    messages = build_messages(state["question"], state["passages"], kb_title)
    try:
        reply = services.chat_model.invoke(messages, config)
    except Exception as exc:  # any transport/API failure is the same to the user: no answer now
        decision = decide(
            NODE, "error", f"LLM call failed: {type(exc).__name__}", error=str(exc)[:300]
        )
        return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision)
    text = reply.content if isinstance(reply.content, str) else ""
    usage = _usage(reply, services.model_name)
    if not text.strip():
        decision = decide(NODE, "error", "LLM returned an empty answer")
        return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision, usage=usage)
    if prompts.NO_ANSWER in text:
        decision = decide(NODE, "miss", "model: the passages do not answer the question")
        return refuse_with(RefusalReason.NO_RELEVANT_DOCS, decision, usage=usage)
    decision = decide(
        NODE,
        "pass",
        "drafted",
        prompt_version=prompts.PROMPT_VERSION,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
    )
    return {"draft": text.strip(), "usage": usage, "trail": [decision]}


def _usage(reply: Any, model: str) -> Usage:
    meta = getattr(reply, "usage_metadata", None) if isinstance(reply, AIMessage) else None
    prompt_tokens = int(meta.get("input_tokens", 0)) if meta else 0
    completion_tokens = int(meta.get("output_tokens", 0)) if meta else 0
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        estimated_cost_usd=estimate_cost(model, prompt_tokens, completion_tokens),
    )
