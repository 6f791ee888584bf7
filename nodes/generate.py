"""generate: asks the chat model to answer from the reranked passages, citing them as [n].

Refuses llm_unavailable when no model is configured or the call fails (timeout, HTTP error, empty
output), and no_relevant_docs when the model itself says the passages don't answer; except when it
was given a single document passage (rerank passed one, or the judge chose one): retrieval settled
on that passage and only the small model disagrees, so its own sentences are tried (`quote`, which
then asks the quote to hold the question's key terms: the model's "no" outweighs closeness in
meaning alone). A draft longer than `max_answer_tokens` is cut there, at its last whole sentence:
the cap bounds the wait on a CPU (the small model pads long answers with steps the passages never
gave), and a half sentence is neither an answer nor checkable. A draft that echoes the prompt, leaks
the instructions, cites a passage that was not given or only talks about the passages gets one retry
with a correction (guardrag.core.grounding.drafts); `ground` judges whatever comes back.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from guardrag.config import prompts
from guardrag.contract import RefusalReason, Usage
from guardrag.core.grounding.drafts import check_draft, declines, finished
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide, knobs, refuse_with, reply_usage

NODE = "generate"


def format_passages(passages: list[Candidate]) -> str:
    return "\n\n".join(
        prompts.PASSAGE_BLOCK.format(number=number, text=passage_text(p))
        for number, p in enumerate(passages, start=1)
    )


def build_messages(question: str, passages: list[Candidate], kb_title: str) -> list[Any]:
    return [
        SystemMessage(prompts.ANSWER_SYSTEM.format(kb_title=kb_title, no_answer=prompts.NO_ANSWER)),
        HumanMessage(
            prompts.ANSWER_USER.format(
                count=len(passages), passages=format_passages(passages), question=question
            )
        ),
    ]


def passage_text(passage: Candidate) -> str:
    return f"{passage.payload.get('title', '')}\n{passage.payload.get('text', '')}".strip()


def _one_document(passages: list[Candidate]) -> bool:
    """Whether the model was given exactly one passage, and that a document chunk."""
    return len(passages) == 1 and not passages[0].is_faq


def generate(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    services = runtime.context
    if services.chat_model is None:
        decision = decide(NODE, "error", "no LLM endpoint configured (GUARDRAG_LLM_BASE_URL)")
        return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision)
    info = services.store.kb_info(state["kb"])
    kb_title = info.description if info and info.description else state["kb"]
    passages = state["passages"]
    question = state["question"]
    if state.get("rephrased"):
        question = prompts.QUESTION_REPHRASED.format(
            question=question, rephrased=state["rephrased"]
        )
    messages = build_messages(question, passages, kb_title)
    model = services.chat_model.bind(max_tokens=knobs(config).max_answer_tokens)
    usage = Usage()
    retried: tuple[str, ...] = ()
    while True:
        try:
            reply = model.invoke(messages, config)
        except Exception as exc:  # any transport/API failure is the same to the user: no answer now
            decision = decide(
                NODE, "error", f"LLM call failed: {type(exc).__name__}", error=str(exc)[:300]
            )
            return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision, usage=usage)
        text = reply.content if isinstance(reply.content, str) else ""
        if reply.response_metadata.get("finish_reason") == "length":
            text = finished(text)  # the token cap cut it: its half sentence goes
        usage += reply_usage(reply, services.model_name)
        if not text.strip():
            decision = decide(NODE, "error", "LLM returned an empty answer")
            return refuse_with(RefusalReason.LLM_UNAVAILABLE, decision, usage=usage)
        if prompts.NO_ANSWER in text or declines(text):
            said_no = "model: the passages do not answer the question"
            if knobs(config).grounding_fallback_to_faq and _one_document(passages):
                decision = decide(NODE, "hit", f"{said_no}; the passage's sentences to be quoted")
                return {"quote_from": passages, "usage": usage, "trail": [decision]}
            decision = decide(NODE, "miss", said_no)
            return refuse_with(RefusalReason.NO_RELEVANT_DOCS, decision, usage=usage)
        check = check_draft(
            text, [passage_text(p) for p in passages], state["question"], prompts.LEAKABLE
        )
        if not check.problems or retried:
            break
        retried = check.problems  # one bounded retry, telling the model what was wrong
        correction = prompts.RETRY_USER.format(
            problems="; ".join(check.problems), count=len(passages), no_answer=prompts.NO_ANSWER
        )
        messages = [*messages, AIMessage(text), HumanMessage(correction)]
    decision = decide(
        NODE,
        "pass",
        "drafted after one retry" if retried else "drafted",
        prompt_version=prompts.PROMPT_VERSION,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        retried_because=list(retried),
        unresolved=list(check.problems),
        removed_source_talk=list(check.removed),
    )
    return {"draft": check.text or text.strip(), "usage": usage, "trail": [decision]}
