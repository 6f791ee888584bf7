"""Splitting an answer into the claims grounding judges: citations, sentences, clauses,
filler that carries nothing to check, and lead-ins ("Steps to verify your card:")."""

from __future__ import annotations

import re

from guardrag.core.grounding.entities import extract_entities
from guardrag.core.grounding.lexicon import content_words
from guardrag.core.grounding.numbers import extract_mentions
from guardrag.core.text import words, wordset

#: A sentence ending in ":" with at most this many content words and no verb is a lead-in
#: ("Steps to verify your card:"): only its numbers and entities are checked.
LEAD_IN_MAX_WORDS = 5

# --- citations and splitting ---

#: [1], [1,2], [1, 2], [1-3], [1;2]; adjacent brackets [1][2] are two matches. Passage numbers
#: are small: a bracketed year copied from a guideline ("[2015]", when a recommendation was
#: last updated) is text, not a citation.
CITATION_RE = re.compile(r"\[\s*(\d{1,3}(?:\s*(?:,|;|-|–|and)\s*\d{1,3})*)\s*\]")
#: One citation marker, "[2]", as the model writes it and the answer shows it.
MARKER_RE = re.compile(r"\[(\d+)\]")
_CITATION_RANGE_RE = re.compile(r"(\d+)\s*[-–]\s*(\d+)")
#: Sentence end: terminal punctuation, closing quotes, then citations that belong to the sentence
#: before ("... 5 days. [1] Next ...") and whitespace.
_SENTENCE_END_RE = re.compile(r"[.!?]+[\"')\]”’]*((?:\s*\[[\d,;\s–-]+\])*)\s+")
#: Abbreviations whose full stop does not end a sentence.
ABBREVIATIONS = wordset(
    "e.g i.e etc vs mr mrs ms dr sdn bhd approx incl min max dept jan feb mar apr jun jul aug "
    "sep sept oct nov dec st a.m p.m"
)
_BULLET_RE = re.compile(r"^\s*(?:[-*•·‣–]|\d{1,2}[.)])\s+")
_HEADING_RE = re.compile(r"^[ \t]*(?:#+[ \t]+(.+?)|\*\*([^*\n]+)\*\*:?)[ \t]*$", re.MULTILINE)
_MARKDOWN_RE = re.compile(r"\*\*|__|`|^#+\s*", re.MULTILINE)
#: Split on ";" outside citation brackets.
_SEMICOLON_RE = re.compile(r";(?![^\[]*\])")
#: ", and" / ", but" between two statements: each side is judged alone, so one true clause cannot
#: carry a false one. Both sides need this many content words (else it is a list, kept whole).
_COORDINATION_RE = re.compile(r"(,\s+(?:and|but|while|whereas|although|though)\s+)")
MIN_CLAUSE_WORDS = 3

#: Leading phrases stripped before embedding a claim (they dilute its meaning).
FILLER_PREFIX_RE = re.compile(
    r"^(?:(?:yes|sure|certainly|okay|ok)\b[,!.]?\s*"
    r"|(?:here(?:'s| is| are) (?:what i found|the answer|a summary)[^:,.]*[:,.]?\s*)"
    r"|(?:(?:based on|according to|as (?:stated|mentioned|noted) in|per) (?:the )?(?:provided |given )?"
    r"(?:sources?|passages?|documents?|information|context|faq|knowledge base)\s*[:,]?\s*)"
    r"|(?:in (?:summary|short)|to summari[sz]e|please note(?: that)?|note that)\s*[:,]?\s*)",
    re.IGNORECASE,
)
#: Whole sentences of politeness, ignored when they carry no number or entity.
FILLER_SENTENCE_RE = re.compile(
    r"^(?:i hope (?:this|that) helps|hope (?:this|that) helps|let me know\b.*"
    r"|feel free to (?:ask|reach out|contact|let)\b.*|is there anything else\b.*"
    r"|happy to help\b.*|thank you\b.*|thanks\b.*)[.!?]*$",
    re.IGNORECASE,
)
#: A lead-in with one of these is a statement, not a heading ("Withdrawals are free:").
VERB_HINTS = wordset(
    "is are was were be been can cannot must should may will has have do does charge charges "
    "require requires apply applies need needs"
)

#: Words that make the right side of ", and" a statement rather than a list item.
_CLAUSE_HINTS = VERB_HINTS | wordset(
    "also only never it they you we there this these he she its their your earn earns get gets "
    "cost costs take takes pay pays"
)

# ------------------------------------------------------------------------------- splitting


def parse_citations(text: str) -> tuple[int, ...]:
    """Every passage number cited in `text`, sorted, ranges expanded ([1-3] -> 1, 2, 3)."""
    found: set[int] = set()
    for match in CITATION_RE.finditer(text):
        inner = match.group(1)
        for lo, hi in _CITATION_RANGE_RE.findall(inner):
            found.update(range(int(lo), int(hi) + 1))
        inner = _CITATION_RANGE_RE.sub(" ", inner)
        found.update(int(n) for n in re.findall(r"\d+", inner))
    return tuple(sorted(found))


def strip_citations(text: str) -> str:
    text = CITATION_RE.sub(" ", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return re.sub(r"\s{2,}", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences of one line; citations right after a full stop stay with the sentence before."""
    out: list[str] = []
    start = 0
    for match in _SENTENCE_END_RE.finditer(text):
        before = text[start : match.start()].split()
        last = before[-1].lower().rstrip(".") if before else ""
        if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue  # "e.g. the fee", "Sdn. Bhd." and initials do not end a sentence
        out.append(text[start : match.end()].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def lines_of(text: str) -> list[str]:
    """Non-empty lines, bullets and markdown emphasis removed; a heading line ("## Fees",
    "**Fees**") becomes a lead-in ("Fees:") so it is not judged as a claim."""
    text = text.replace("\u00a0", " ").replace("\u200b", "")
    text = _HEADING_RE.sub(lambda m: (m.group(1) or m.group(2)).rstrip(":") + ":", text)
    text = _MARKDOWN_RE.sub("", text)
    return [_BULLET_RE.sub("", line).strip() for line in text.splitlines() if line.strip()]


def claim_parts(sentence: str) -> list[str]:
    """A sentence split on ";" and on ", and/but ..." where both sides are full statements."""
    parts: list[str] = []
    for piece in _SEMICOLON_RE.split(sentence):
        chunks = _COORDINATION_RE.split(piece)  # text, separator, text, ...
        merged = [chunks[0]]
        for separator, chunk in zip(chunks[1::2], chunks[2::2], strict=True):
            right = strip_citations(chunk)
            statement = (
                len(content_words(strip_citations(merged[-1]))) >= MIN_CLAUSE_WORDS
                and len(content_words(right)) >= MIN_CLAUSE_WORDS
                and bool(set(words(right)) & _CLAUSE_HINTS)
            )
            if statement:
                merged.append(chunk)
            else:  # a list item ("debit card, FPX, and DuitNow"): keep it in its sentence
                merged[-1] += separator + chunk
        parts += merged
    return parts


def split_claims(answer: str) -> list[tuple[str, tuple[int, ...]]]:
    """Claims of an answer (lines, then sentences, then ";" clauses), each with its citations.

    An uncited clause before a cited one in the same sentence inherits its citations (a citation at
    the end of a sentence covers the whole sentence); uncited sentences stay uncited. Fragments that
    are only citations attach to the claim before them. Filler is kept here; check_grounding
    decides what to ignore.
    """
    claims: list[tuple[str, tuple[int, ...]]] = []
    for line in lines_of(answer):
        for sentence in split_sentences(line):
            parts = [(strip_citations(p), parse_citations(p)) for p in claim_parts(sentence)]
            inherited: tuple[int, ...] = ()
            resolved: list[tuple[str, tuple[int, ...]]] = []
            for text, cites in reversed(parts):  # right to left: a later citation covers earlier
                inherited = cites or inherited
                resolved.append((text, cites or inherited))
            for text, cites in reversed(resolved):
                if re.search(r"[A-Za-z0-9]", text):
                    claims.append((text, cites))
                elif cites and claims:  # "[2]" alone: it belongs to the claim before
                    prev_text, prev_cites = claims[-1]
                    claims[-1] = (prev_text, tuple(sorted({*prev_cites, *cites})))
                elif cites:
                    claims.append(("", cites))
    return claims


def embed_text(claim: str) -> str:
    text = claim
    while (stripped := FILLER_PREFIX_RE.sub("", text, count=1)) != text:
        text = stripped
    return text or claim


def is_filler(claim: str) -> bool:
    """No content word, number or entity: nothing to verify ("Here is what I found:")."""
    if extract_mentions(claim) or extract_entities(claim):
        return False
    return not content_words(claim) or FILLER_SENTENCE_RE.match(claim.strip()) is not None


#: A question mark ending a sentence, before closing brackets or quotes and citations.
_ASKED_RE = re.compile(r"\?[\"')\]”’*]*\.?(?:\s*\[[\d,;\s–-]+\])*\s*$")


def is_question(claim: str) -> bool:
    """A sentence that asks ("Would you like more information?"): it states no answer."""
    return _ASKED_RE.search(claim) is not None


def is_lead_in(claim: str) -> bool:
    """A short heading ending in ":" with no verb ("Steps to verify your card:")."""
    return (
        claim.rstrip().endswith(":")
        and len(content_words(claim)) <= LEAD_IN_MAX_WORDS
        and not set(words(claim)) & VERB_HINTS
    )


def renumber(answer: str, mapping: dict[int, int], *, drop_unknown: bool) -> str:
    """`answer` with each "[n]" marker read through `mapping`; a marker it lacks is dropped
    or kept as written."""

    def new(match: re.Match[str]) -> str:
        old = int(match.group(1))
        if old in mapping:
            return f"[{mapping[old]}]"
        return "" if drop_unknown else match.group(0)

    return MARKER_RE.sub(new, answer)
