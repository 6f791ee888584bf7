"""The chat model as a judge of "which of these passages answers the question?".

Lay wording rarely shares a guideline's terms ("a painless lump in my breast" against
"unexplained breast lump"), so the word-coverage gate that keeps FAQ answers honest refuses
most questions about documents whose right passage was retrieved. Choosing among a few
numbered passages is a narrower task for a small model than writing an answer: its verdict
decides whether the model may write from them at all, and from which. A reply that names no
passage, or one that is not a list of passage numbers, is read as "none".

`states_answer` asks the second question a judge of passages must answer: does this text (a
quote, or the passages a drafted answer cites) state what the question asks for, or is it only
on the same topic ("the penalties for ..." against the rule the penalties are for)? Asked as a
YES/NO, the model's probability of YES is the score, read from the first reply token's
log-probabilities where the endpoint reports them (from the reply's word otherwise).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from guardrag.config import prompts

#: A reply is at most a few passage numbers; a longer one is the model starting to answer.
JUDGE_MAX_TOKENS = 12
#: Characters of each passage the judge reads (the start carries a recommendation's subject).
PASSAGE_CHARS = 900
_NUMBERS = re.compile(r"\d+")
#: Characters of the text the answer judge reads (a quote, or the passages an answer cites).
ANSWER_CHARS = 1800
#: First-token alternatives read for P(YES) (enough to hold both words' spellings).
TOP_LOGPROBS = 10


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


@dataclass(frozen=True)
class AnswerVerdict:
    """P(YES) that the text states what the question asks for, and the model's reply."""

    p_yes: float
    reply: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def states_answer(
    question: str,
    text: str,
    model: BaseChatModel,
    config: RunnableConfig | None = None,
) -> AnswerVerdict:
    """Ask `model` whether `text` states what `question` asks for; raises when the call fails."""
    messages = [
        SystemMessage(prompts.ANSWER_JUDGE_SYSTEM),
        HumanMessage(
            prompts.ANSWER_JUDGE_USER.format(
                question=question, passage=" ".join(text.split())[:ANSWER_CHARS]
            )
        ),
    ]
    bound = model.bind(max_tokens=2, temperature=0, logprobs=True, top_logprobs=TOP_LOGPROBS)
    reply = bound.invoke(messages, config)
    said = reply.content.strip() if isinstance(reply.content, str) else ""
    usage = getattr(reply, "usage_metadata", None) or {}
    p_yes = yes_probability(getattr(reply, "response_metadata", None) or {})
    if p_yes is None:  # no log-probabilities: the reply's own word
        p_yes = 1.0 if said.upper().startswith("YES") else 0.0
    return AnswerVerdict(
        p_yes, said[:20], int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    )


def yes_probability(metadata: Mapping[str, Any]) -> float | None:
    """P(YES) / P(YES or NO) over the first reply token's alternatives in a reply's
    `response_metadata`; None when they are missing or hold neither word."""
    try:
        alternatives = metadata["logprobs"]["content"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    yes = no = 0.0
    for alternative in alternatives:
        token = str(alternative.get("token", "")).strip().upper()
        weight = math.exp(float(alternative.get("logprob", -math.inf)))
        if token and "YES".startswith(token[:3]):
            yes += weight
        elif token and "NO".startswith(token[:2]):
            no += weight
    return round(yes / (yes + no), 4) if yes + no > 0 else None
