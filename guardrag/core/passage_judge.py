"""The chat model as a judge of "which of these passages answers the question?".

Lay wording rarely shares a guideline's terms ("a painless lump in my breast" against
"unexplained breast lump"), so the word-coverage gate that keeps FAQ answers honest refuses
most questions about documents whose right passage was retrieved. Choosing among a few
numbered passages is a narrower task for a small model than writing an answer: its verdict
decides whether the model may write from them at all, and from which. A reply that names no
passage, or one that is not a list of passage numbers, is read as "none".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from guardrag.config import prompts

#: A reply is at most a few passage numbers; a longer one is the model starting to answer.
JUDGE_MAX_TOKENS = 12
#: Characters of each passage the judge reads (the start carries a recommendation's subject).
PASSAGE_CHARS = 900
_NUMBERS = re.compile(r"\d+")


@dataclass(frozen=True)
class PassageVerdict:
    """The passages (1-based, as shown to the model) the judge says answer, and its reply."""

    chosen: tuple[int, ...]
    reply: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def judge_passages(
    question: str,
    passages: Sequence[str],
    model: BaseChatModel,
    config: RunnableConfig | None = None,
) -> PassageVerdict:
    """Ask `model` which of `passages` answer `question`; raises when the call fails."""
    shown = "\n\n".join(
        f"[{number}] {' '.join(text.split())[:PASSAGE_CHARS]}"
        for number, text in enumerate(passages, start=1)
    )
    messages = [
        SystemMessage(prompts.PASSAGE_JUDGE_SYSTEM),
        HumanMessage(prompts.PASSAGE_JUDGE_USER.format(question=question, passages=shown)),
    ]
    reply = model.bind(max_tokens=JUDGE_MAX_TOKENS, temperature=0).invoke(messages, config)
    text = reply.content.strip() if isinstance(reply.content, str) else ""
    usage = getattr(reply, "usage_metadata", None) or {}
    return PassageVerdict(
        read_choice(text, len(passages)),
        text[:80],
        int(usage.get("input_tokens", 0)),
        int(usage.get("output_tokens", 0)),
    )


def read_choice(reply: str, shown: int) -> tuple[int, ...]:
    """The passage numbers a reply names, in its order; () for "none" or anything else."""
    text = reply.strip().upper()
    if not text or text.startswith("NONE") or len(text) > 40:
        return ()
    numbers = [int(n) for n in _NUMBERS.findall(text)]
    if not numbers or any(n < 1 or n > shown for n in numbers):
        return ()
    return tuple(dict.fromkeys(numbers))
