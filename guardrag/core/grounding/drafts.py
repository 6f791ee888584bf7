"""Draft hygiene: what `generate` checks in a model's draft before grounding judges it.

Small local models sometimes talk about their sources instead of answering ("This is stated in
passage [1]."), echo the prompt back, or cite a passage number that was never given. `tidy`
removes sentences that only talk about the sources; `check_draft` names what is still wrong, so
`generate` can ask the model once more (one bounded retry) before `ground` decides. `prune`
lets `ground` leave out unsupported uncited remarks when everything else is grounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from guardrag.core.embedder import Embedder
from guardrag.core.grounding.claims import check_grounding
from guardrag.core.grounding.lexicon import content_words
from guardrag.core.grounding.report import GroundingReport, Passage
from guardrag.core.grounding.split import CITATION_RE, parse_citations, split_sentences
from guardrag.core.guards.output.prompt_leak import check_prompt_leak

#: A sentence that opens with a pointer ("This", "It", "As") and is about the passages themselves.
_SOURCE_TALK = re.compile(
    r"^\W*(?:this|that|these|those|it|both|each|all|as|see)\b[^.!?]*"
    r"\b(?:passages?|sources?|documents?|sections?|context|excerpts?)\b",
    re.IGNORECASE,
)
#: "This is supported by [1] and [2]." - a pointer at citations and nothing else.
_CITATION_POINTER = re.compile(
    r"^\W*(?:this|that|it|these)\s+(?:is|are|was|were)\s+(?:\w+\s+)?"
    r"(?:stated|supported|mentioned|explained|described|outlined|covered|noted|confirmed)\s+"
    r"(?:in|by)\s+(?:both|all|the|and|\[\d+\]|,|\s)*[.!]?$",
    re.IGNORECASE,
)
#: "If you need further assistance, please refer to Passage [2].": a referral to the passages,
#: which the customer never sees; dropped when nothing but help-desk words is left beside it.
_REFERRAL = re.compile(
    r"\b(?:refer(?:ring)?\s+to|see|check|consult|read)\s+(?:the\s+)?"
    r"(?:passages?|sources?|documents?)\b(?:\s*\[\d+\])*",
    re.IGNORECASE,
)
_HELP_WORDS = content_words(
    "if you need want require further more additional assistance help support details detail "
    "information questions please kindly for any"
)
_QUALIFIER = re.compile(
    r"^\W*(?:however|but|only|although|though|note)\b"
    r"|\b(?:not|no|never|cannot|can't|won't|don't|doesn't|isn't|aren't|without|except|unless)\b",
    re.IGNORECASE,
)
_ANSWER_WORD = re.compile(r"^\W*(?:yes|no)\b", re.IGNORECASE)
_CITES = r"(?:\[\d+\][\s,]*(?:and\s+)?)+"
#: "According to passage [1], X." / "Passage [2] states that X.": a claim behind a pointer.
_POINTER_LEAD = re.compile(
    r"^\W*(?:(?:according to|as (?:stated|mentioned|noted|explained|described) in|based on)\s+"
    rf"(?:the\s+)?(?:passages?|sources?)\s*{_CITES},?"
    rf"|(?:the\s+)?(?:passages?|sources?)\s*{_CITES}"
    r"(?:states?|says?|mentions?|explains?|notes?|confirms?|indicates?)\s+(?:that\s+)?)\s*",
    re.IGNORECASE,
)
#: "X, as stated in passage [1]." / "X (see passage 1).": the same pointer after the claim.
_POINTER_TAIL = re.compile(
    r",?\s*\(?\s*(?:as\s+(?:stated|mentioned|noted|explained|described|shown)\s+in|according\s+to"
    rf"|see|per)\s+(?:the\s+)?(?:passages?|sources?)\s*(?P<cites>{_CITES}|\d+\s*)?\)?"
    r"\s*(?P<end>[.!?]?)\s*$",
    re.IGNORECASE,
)
#: "... warnings. [1]" at the end of a line: the citation belongs inside the sentence.
_TRAILING_CITATIONS = re.compile(r"([.!?])((?:[ \t]*\[\d+\])+)[ \t]*$", re.MULTILINE)
#: Pieces of our prompt's scaffolding that never belong in an answer.
_ECHO = re.compile(r"</?passage\b|^\s*(?:passages|question)\s*:", re.IGNORECASE | re.MULTILINE)


#: The model saying in its own words that the passages hold no answer: "The FCA penalties for
#: ... are not in sources.", "The passages do not mention a retention period."
_DECLINE = re.compile(
    r"\b(?:is|are|was|were)\s+not\s+(?:\w+\s+)?(?:in|found\s+in|mentioned\s+in|provided\s+in"
    r"|given\s+in|stated\s+in|specified\s+in|covered\s+(?:in|by)|included\s+in|available\s+in"
    r"|addressed\s+in)\s+(?:the\s+)?(?:provided\s+|given\s+)?"
    r"(?:sources?|passages?|context|documents?|texts?)\b"
    r"|\b(?:sources?|passages?|context|documents?)\s+(?:provided\s+|given\s+)?"
    r"(?:do(?:es)?\s+not|don't|doesn't)\s+(?:\w+\s+)?(?:mention|say|state|specify|provide"
    r"|contain|include|cover|address|give|describe|discuss)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DraftCheck:
    """A tidied draft and what is still wrong with it (empty when nothing is)."""

    text: str
    removed: tuple[str, ...]
    problems: tuple[str, ...]


def is_source_talk(sentence: str) -> bool:
    """True for a sentence that only points at the sources ("This is stated in passage [1].")."""
    if _ANSWER_WORD.match(sentence):
        return False  # "Yes [1]." carries the answer
    if _SOURCE_TALK.match(sentence) or _CITATION_POINTER.match(sentence):
        return True
    if _REFERRAL.search(sentence) and content_words(_REFERRAL.sub(" ", sentence)) <= _HELP_WORDS:
        return True
    bare = CITATION_RE.sub(" ", sentence)  # a citation with no words and no figures beside it
    return bare != sentence and not content_words(bare) and not re.search(r"\d", bare)


def declines(draft: str) -> bool:
    """Whether every sentence of `draft` says, citing nothing, that the passages do not answer:
    the model's NOT_IN_SOURCES in its own words. Read as a claim, such a sentence sent a draft
    that answers nothing on to the fallbacks meant for a badly worded answer. A cited sentence
    is a claim ("Your passport is not included in the documents we return [1].")."""
    sentences = [s for line in draft.splitlines() for s in split_sentences(line) if s.strip()]
    return bool(sentences) and all(
        _DECLINE.search(s) and not CITATION_RE.search(s) for s in sentences
    )


def without(draft: str, drop: Callable[[str], bool]) -> tuple[str, tuple[str, ...]]:
    """The draft without the sentences `drop` picks (layout kept), and those sentences."""
    removed: list[str] = []
    lines = []
    for line in draft.splitlines():
        kept = line
        for sentence in split_sentences(line):
            if drop(sentence):
                removed.append(sentence)
                kept = kept.replace(sentence, "", 1)
        if kept.strip() or not line.strip():
            lines.append(kept.rstrip())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return re.sub(r"[ \t]{2,}", " ", text), tuple(removed)


#: A sentence that ends: terminal punctuation, closing quotes, then citations.
_ENDED = re.compile(r"[.!?][\"')\]”’*]*(?:\s*\[[\d,;\s–-]+\])*$")


def finished(draft: str) -> str:
    """A draft the token cap cut off, without its unfinished last sentence (and the lead-in
    "follow these steps:" it leaves dangling): half a sentence is neither an answer nor
    checkable. The draft as it is when nothing before that is whole."""
    lines = draft.rstrip().splitlines()
    for unfinished in (lambda s: not _ENDED.search(s), lambda s: s.endswith(":")):
        sentences = split_sentences(lines[-1]) if lines else []
        if not sentences or not unfinished(sentences[-1]):
            break
        cut = lines[-1].rstrip()
        lines[-1] = cut[: len(cut) - len(sentences[-1])].rstrip()
        while lines and not content_words(lines[-1]):
            lines.pop()  # nothing left of the line but a bullet's mark, or blank lines
    kept = "\n".join(lines).rstrip()
    return kept if content_words(kept) else draft


def cite_inline(draft: str) -> str:
    """Citations moved into the sentences they support: "Passage [1] states that X." and
    "According to passage [1], X." become "X [1]."; "X. [1]" at the end of a line "X [1]."."""
    draft = _TRAILING_CITATIONS.sub(lambda m: f" {' '.join(m[2].split())}{m[1]}", draft)
    lines = []
    for line in draft.splitlines():
        for sentence in split_sentences(line):
            if (restated := _restate(sentence)) != sentence:
                line = line.replace(sentence, restated, 1)
        lines.append(line)
    return "\n".join(lines)


def _restate(sentence: str) -> str:
    tail = _POINTER_TAIL.search(sentence)
    if tail and content_words(sentence[: tail.start()]):
        cites = " ".join(f"[{n}]" for n in re.findall(r"\d+", tail["cites"] or ""))
        sentence = f"{sentence[: tail.start()].rstrip()} {cites}".rstrip() + (tail["end"] or ".")
    lead = _POINTER_LEAD.match(sentence)
    claim = sentence[lead.end() :].strip() if lead else ""
    if lead is None or not content_words(claim):
        return sentence
    cites = " ".join(re.findall(r"\[\d+\]", lead[0]))
    end = len(claim.rstrip(".!?"))
    return f"{claim[0].upper()}{claim[1:end]} {cites}{claim[end:]}"


def tidy(draft: str) -> tuple[str, tuple[str, ...]]:
    """The draft with its citations inline (cite_inline) and without source-talk sentences,
    and the sentences removed."""
    return without(cite_inline(draft), is_source_talk)


def is_prunable(sentence: str) -> bool:
    """An uncited remark with no figures and no qualifier: safe to leave out of an answer.

    Citations, numbers, negations and "however/unless/only" change what the rest means, so a
    sentence carrying them is never dropped: the whole draft is judged instead.
    """
    return not (
        parse_citations(sentence) or re.search(r"\d", sentence) or _QUALIFIER.search(sentence)
    )


def prune(
    draft: str,
    passages: Sequence[Passage],
    embedder: Embedder,
    min_similarity: float,
    answer_first: bool = False,
) -> tuple[str, tuple[str, ...], GroundingReport] | None:
    """The draft without its unsupported uncited remarks, the remarks, and the report on what
    is left, when that is fully grounded ("It is 1.5% [1]. This keeps your money safe." ->
    "It is 1.5% [1]."); None otherwise.

    With `answer_first` (the question asks what something is) the opening sentence is the
    answer, never a remark: asked "What is fraud?", a draft whose invented definition is left
    out would answer with the passage's steps to report a scam, another question's answer. (An
    opening that only restates a how-to question, "Yes, you can set a monthly transfer.", is
    a remark like any other.)"""
    sentences = (s for line in draft.splitlines() for s in split_sentences(line))
    opening = next(sentences, None) if answer_first else None

    def unsupported(sentence: str) -> bool:
        if sentence == opening or not is_prunable(sentence):
            return False
        report = check_grounding(sentence, passages, embedder, min_similarity=min_similarity)
        return not report.supported

    kept, dropped = without(draft, unsupported)
    if not dropped or not kept:
        return None
    report = check_grounding(kept, passages, embedder, min_similarity=min_similarity)
    return (kept, dropped, report) if report.supported else None


def check_draft(
    draft: str, passages: Sequence[str], question: str, prompts: Sequence[str]
) -> DraftCheck:
    """Tidies `draft` and lists its problems: echo, prompt leak, unknown citation, nothing left."""
    text, removed = tidy(draft)
    problems = []
    if _ECHO.search(draft) or _same_words(text, question):
        problems.append("echoed the prompt or the question instead of answering")
    if check_prompt_leak(text, passages, prompts):
        problems.append("repeated the instructions")
    unknown = [n for n in parse_citations(text) if not 1 <= n <= len(passages)]
    if unknown:
        cited = ", ".join(f"[{n}]" for n in unknown)
        problems.append(f"cited {cited} but only passages [1] to [{len(passages)}] exist")
    if not text:
        problems.append("only talked about the passages and did not answer")
    return DraftCheck(text=text, removed=removed, problems=tuple(problems))


def _same_words(text: str, question: str) -> bool:
    """A draft that is a question made of the customer's own words repeats it back."""
    words = content_words(text)
    return text.rstrip().endswith("?") and bool(words) and words <= content_words(question)
