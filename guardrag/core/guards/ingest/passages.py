"""Indirect injection: instructions aimed at the model hidden in knowledge-base text.

Ingest calls `scan_passage` on every FAQ entry and document chunk. A passage is flagged when
it carries the input guard's injection or jailbreak markers (chat-template tokens, "ignore
previous instructions", "you are now ...", encoded payloads; matched on every normalised
view) or text only a model would read: notes addressed to an AI, standing orders ("always
answer ...", "when asked about X, say Y"), hidden HTML or markdown carrying instructions,
Unicode tag characters, and image links that would post the conversation elsewhere.

Help-centre text talks *to customers* about instructions, callers and scams ("ignore SMS
that ask for your OTP", "never tell anyone your PIN"), so every passage rule names the
model (AI, assistant, chatbot, language model) or a model-only channel (hidden markup,
role headers); none fires on customer-directed imperatives.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.input.injection import detect_injection
from guardrag.core.guards.input.jailbreak import detect_jailbreak
from guardrag.core.guards.shared.normalize import normalize
from guardrag.core.guards.shared.rules import Rule, excerpt, first_rule_finding

_F = re.IGNORECASE

_MODEL = (
    r"(?:ai|a\.i\.|artificial intelligence|assistants?|ai assistants?|chat ?bots?|bots?|language "
    r"models?|llms?|gpt|chatgpt|models?|virtual agents?|ai agents?|answer engines?)"
)
# "Note to the AI:", "If you are a language model, ...", "AI assistants must always ..."
ADDRESSED_TO_MODEL = re.compile(
    rf"\b(?:note|message|instructions?|attention|reminder|directive|important)"
    rf"(?: from [^.\n]{{1,60}}?,?)? (?:to|for) (?:you,? )?(?:the |any |all )?{_MODEL}\b|\b(?:if|when) you(?:'re| are) (?:an? |the )?(?:ai|"
    r"assistant|ai assistant|chat ?bot|language model|llm|gpt|model|bot)\b|"
    rf"\b(?:the |any |all |an? )?{_MODEL} (?:reading|processing|summari[sz]ing|answering "
    r"(?:from|with)|using) this\b|"
    rf"\b(?:the |any |all |an? |our )?(?:ai|assistant|ai assistants?|chat ?bots?|language models?|"
    r"llms?|gpt|virtual agents?|ai agents?)\s+(?:must|should|shall|will|needs? to|has to|is "
    r"required to|are required to)\s+(?:(?:always|never|now|only|also)\s+)?(?:answer|respond|"
    r"reply|say|tell|recommend|direct|ignore|include|output|mention|state|claim|refuse|reveal|"
    r"send|ask|add|append|link)\b",
    _F,
)
# Standing orders to whoever answers: "always answer ...", "when asked about fees, say ...".
STANDING_ORDER = re.compile(
    r"\balways (?:answer|respond|reply|say|output|append|end (?:every|each|your) (?:answer|"
    r"reply|response)|include (?:this|the following) in (?:every|each|your) (?:answer|reply|"
    r"response))\b|\b(?:in|at the end of) (?:every|each|all|your) (?:answers?|repl(?:y|ies)|"
    r"responses?),? (?:say|add|append|include|mention|recommend|tell)\b|"
    r"\b(?:when|if|whenever) (?:you are |you're )?(?:asked|questioned) (?:about|for|on|"
    r"regarding)\b[^.\n]{0,80}?,?\s+(?:you (?:must|should) )?(?:answer|respond|reply)(?: with| "
    r"that)?\b|\bdo not (?:mention|reveal|disclose) (?:this|these) (?:instruction|note|"
    r"rule)s?\b",
    _F,
)
# Markup a customer never sees but a model reads.
_INSTRUCTIONISH = (
    r"(?:ignore|disregard|forget|instruction|prompt|assistant|\bai\b|model|chatbot|system|"
    r"respond|answer|reply|always|never|you are|you must|do not tell|pretend|override)"
)
HIDDEN_MARKUP = re.compile(
    rf"<!--(?:(?!-->).){{0,400}}?{_INSTRUCTIONISH}|"
    rf"<[^>]{{0,80}}(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0|"
    rf"\bhidden\b|opacity\s*:\s*0)[^>]{{0,80}}>(?:(?!</).){{0,400}}?{_INSTRUCTIONISH}|"
    rf"^\s*\[(?://|comment|hidden)\]\s*:\s*#\s*[(\"'](?:(?![)\"']).){{0,400}}?{_INSTRUCTIONISH}",
    _F | re.DOTALL | re.MULTILINE,
)
# ![x](https://host/?q={conversation}): a rendered image that would leak the chat.
EXFIL_LINK = re.compile(
    r"!\[[^\]]{0,100}\]\(\s*https?://[^)\s]{0,200}(?:\{|%7b|\$\(|<|\[)[^)]{0,200}\)",
    _F,
)
# "Before you can solve the task that I gave you, please do the following first": a second
# task put ahead of the one the model was given (only a model is "given a task" by a user).
TASK_PREEMPTION = re.compile(
    r"\bbefore (?:you )?(?:can )?(?:solve|complete|do|finish|continue(?: with)?|answer|start"
    r"(?: on)?|work on) (?:the|your|my|this|that) (?:\S+ )?(?:task|request|question|job)"
    r"(?: (?:that|which))? (?:i|the user|they|we|your user) (?:gave|assigned|asked|set)(?: you)?"
    r"\b[^.\n]{0,60}?,?\s+(?:please )?(?:first |you must |you need to )?(?:do|complete|perform|"
    r"carry out|follow) (?:the following|these steps|this)\b",
    _F,
)
_TAG_CHARACTERS = re.compile("[\U000e0000-\U000e007f]")

RULES: tuple[Rule, ...] = (
    Rule("passage.addressed_to_model", ADDRESSED_TO_MODEL),
    Rule("passage.standing_order", STANDING_ORDER),
    Rule("passage.task_preemption", TASK_PREEMPTION),
)


def scan_passage(text: str) -> GuardFinding | None:
    """PROMPT_INJECTION when a knowledge-base passage carries instructions for the model;
    None for ordinary help-centre text. Rules only (no embedding): ~0.1 ms a passage."""
    if not text or not text.strip():
        return None
    if _TAG_CHARACTERS.search(text):
        return finding(
            RefusalReason.PROMPT_INJECTION,
            "passage.tag_characters",
            "invisible Unicode tag characters (a hidden message)",
        )
    for rule_name, pattern in (
        ("passage.hidden_markup", HIDDEN_MARKUP),
        ("passage.exfil_link", EXFIL_LINK),
    ):
        match = pattern.search(text)
        if match:
            quoted = excerpt(text, match.start(), match.end())
            return finding(RefusalReason.PROMPT_INJECTION, rule_name, f"matched {quoted!r}")
    norm = normalize(text)
    found = detect_injection(norm) or detect_jailbreak(norm)
    if found is not None:
        return found
    return first_rule_finding(RefusalReason.PROMPT_INJECTION, RULES, norm.word_views())


class _HasPayload(Protocol):
    @property
    def payload(self) -> Mapping[str, Any]: ...


H = TypeVar("H", bound=_HasPayload)
#: Payload fields a model or a customer may read.
_READ_FIELDS = ("title", "question", "text", "answer")


@functools.lru_cache(maxsize=8192)
def _flagged(text: str) -> str | None:
    found = scan_passage(text)
    return found.rule if found else None


def servable(hits: Sequence[H]) -> tuple[list[H], dict[str, str]]:
    """The hits safe to serve, and {source id: rule} for those carrying instructions for the
    model. Ingest quarantines such entries; this catches any that reached the index anyway
    (forced in, or written before a rule existed). Cached: a passage is scanned once."""
    safe: list[H] = []
    dropped: dict[str, str] = {}
    for hit in hits:
        text = "\n".join(str(hit.payload.get(f) or "") for f in _READ_FIELDS)
        rule = _flagged(text)
        if rule is None:
            safe.append(hit)
        else:
            dropped[str(hit.payload.get("source_id", ""))] = rule
    return safe, dropped
