"""UNSAFE_OUTPUT when the answer repeats a run of `LEAK_NGRAM` words from a confidential prompt
that no source contains (quoted passages in the prompt are exempt: they are sanctioned replies
the model is told to use verbatim)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.unit import output_rule

#: Shared word run (with a prompt) long enough to count as leaking it.
LEAK_NGRAM = 10

_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|'[^'\n]{12,}'")
_WORD = re.compile(r"\w+")


def _shingles(text: str, n: int) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@lru_cache(maxsize=32)
def _prompt_shingles(prompt: str, n: int) -> frozenset[tuple[str, ...]]:
    return frozenset(_shingles(_QUOTED.sub(" ", prompt), n))


def check_prompt_leak(
    answer: str, sources: Sequence[str], prompts: Sequence[str], n: int = LEAK_NGRAM
) -> GuardFinding | None:
    if not prompts:
        return None
    answer_shingles = _shingles(answer, n)
    if not answer_shingles:
        return None
    source_shingles: set[tuple[str, ...]] = set()
    for text in sources:
        source_shingles |= _shingles(text, n)
    for index, prompt in enumerate(prompts):
        prompt_shingles = _prompt_shingles(prompt, n)
        shared = (answer_shingles & prompt_shingles) - source_shingles
        if shared:
            share = len(shared) / max(len(prompt_shingles), 1)
            return finding(
                RefusalReason.UNSAFE_OUTPUT,
                "output.prompt_leak",
                f"{len(shared)} {n}-word run(s) from prompt #{index} in the answer "
                f"({share:.0%} of that prompt)",
                score=min(1.0, 0.5 + share),
            )
    return None


GUARD = output_rule(
    "output_prompt_leak",
    "OutputPromptLeak",
    lambda call: check_prompt_leak(call.text, call.sources, call.prompts),
)
