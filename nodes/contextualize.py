"""contextualize: turns a follow-up into a standalone question, then screens it again.

Only in a thread with history, and only for messages that lean on it ("and how long does that
take?", "what about e-Mas?", "is it free?"): the chat model rewrites the message using the last
turns; without a model, or when its rewrite is unusable, the previous question is prepended instead
(`follow_up` then keeps the customer's own words: rerank answers only from entries that speak to
them). A number answering offered entries ("2") becomes that entry's question. The standalone
question then goes through the input guard again (a follow-up may complete an attack the first
message started) and is what every later stage answers.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from guardrag.config import prompts
from guardrag.contract import Usage
from guardrag.core.choices import picked
from guardrag.core.screening import EmbeddingFailed, screen_follow_up
from guardrag.graph.state import PipelineState, Turn
from guardrag.nodes.common import (
    QUESTION_MAX_TOKENS,
    NodeRuntime,
    decide,
    embedding_failed,
    knobs,
    reply_usage,
    screened_update,
)

NODE = "contextualize"
#: The stage a rewrite's screening is recorded under: the input guard's own.
SCREEN = "moderate_input"
log = logging.getLogger("guardrag.nodes")

#: Words and openings that make a message depend on what was said before.
_REFERS_BACK = re.compile(
    r"^\s*(?:and|also|so|but|then|what about|how about|what if|same)\b"
    r"|\b(?:it|its|it's|that|those|these|they|them|their|ones?)\b",
    re.IGNORECASE,
)
#: Short enough that it can only make sense with the conversation ("for cards?").
SHORT_WORDS = 3
#: How much of each earlier answer the rewrite prompt carries.
ANSWER_CHARS = 300
MAX_QUESTION_CHARS = 300
#: How the standalone question was made without a model (rerank then asks that the answer
#: speaks to the follow-up's own words, not only to the question it was joined to).
PREPENDED = "previous question prepended"
_PREFIX = re.compile(r"^\s*(?:standalone question|question|rewritten)\s*:\s*", re.IGNORECASE)


def is_follow_up(question: str) -> bool:
    return bool(_REFERS_BACK.search(question)) or len(question.split()) <= SHORT_WORDS


def contextualize(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    history = state.get("history") or []
    question = state["question"]
    if not history:
        return {"trail": [decide(NODE, "pass", "no earlier turns: the question stands alone")]}
    chosen = picked(question, history[-1].get("choices") or [])
    if chosen is not None:
        standalone, method, usage = chosen, "an offered entry picked by its number", Usage()
    elif not is_follow_up(question):
        return {"trail": [decide(NODE, "pass", "does not refer back: the question stands alone")]}
    else:
        standalone, method, usage = _rewrite(question, history, config, runtime)
    if standalone == question:  # already screened by moderate_input
        kept = decide(NODE, "pass", "the model kept the question: it stands alone")
        return {"usage": usage, "trail": [kept]}
    screened = _screen(state, standalone, config, runtime)
    rewrote = decide(
        NODE, "pass", f"follow-up rewritten ({method})", standalone=standalone, asked=question
    )
    if screened.get("refusal") is not None:  # blocked on the standalone question
        return {**screened, "usage": usage, "trail": [rewrote, *screened["trail"]]}
    return {
        "usage": usage,
        "question": screened.get("question", standalone),
        "query_vector": screened["query_vector"],
        "follow_up": question if method == PREPENDED else "",
        "trail": [rewrote],
    }


def _screen(
    state: PipelineState, standalone: str, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    """The input guard's update for the rewritten follow-up (as moderate_input's, in its
    name): the customer's message with the previous question, then the standalone one."""
    services, history = runtime.context, state.get("history") or []
    previous = history[-1]["question"] if history else None
    try:
        screened, whole = screen_follow_up(
            services.input_guard,
            services.embedder,
            state["question"],
            previous,
            standalone,
            knobs(config).max_input_chars,
        )
    except EmbeddingFailed as failed:
        return embedding_failed(SCREEN, failed)
    detail = {"screened": "the follow-up with the previous question"} if whole else {}
    return screened_update(SCREEN, screened, standalone, **detail)


def _rewrite(
    question: str, history: list[Turn], config: RunnableConfig, runtime: NodeRuntime
) -> tuple[str, str, Usage]:
    """The standalone question, how it was made (`llm`, or `previous question prepended`),
    and the model call's tokens."""
    model, spent = runtime.context.chat_model, Usage()
    if model is not None:
        transcript = "\n".join(
            f"Customer: {turn['question']}\nAssistant: {turn['answer'][:ANSWER_CHARS]}"
            for turn in history
        )
        messages = [
            SystemMessage(prompts.REWRITE_SYSTEM),
            HumanMessage(prompts.REWRITE_USER.format(history=transcript, question=question)),
        ]
        try:
            reply = model.bind(max_tokens=QUESTION_MAX_TOKENS).invoke(messages, config)
            spent = reply_usage(reply, runtime.context.model_name)
            rewritten = _clean(reply.content if isinstance(reply.content, str) else "")
            if rewritten:
                return rewritten, "llm", spent
        except Exception as exc:  # the fallback below still answers the follow-up
            log.warning("contextualize: rewrite failed (%s); using the previous question", exc)
    return f"{history[-1]['question']} {question}", PREPENDED, spent


def _clean(text: str) -> str:
    """The first line of the model's reply, or "" when it is not a usable question."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = _PREFIX.sub("", lines[0]).strip().strip("\"'“”") if lines else ""
    if not line or len(line) > MAX_QUESTION_CHARS or prompts.NO_ANSWER in line or "<" in line:
        return ""
    return line
