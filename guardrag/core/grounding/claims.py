"""Claim-level grounding: is every claim of a generated answer supported by the passages it cites?

No NLI model ships offline, so support is decided on four kinds of evidence, per claim:

1. meaning: cosine similarity (MiniLM) between the claim and its best-matching source unit
   (a sentence, a whole passage, or the cited passages together);
2. wording: the share of the claim's content words (lowercased, lightly stemmed) found in that unit;
3. hard facts: every amount, percentage, period, time and date in the claim appears with the same
   value (and unit, and frequency) in the cited passages, and is not stated there with another
   value for the same thing; every named entity / product / acronym appears there too;
4. polarity: the claim and the source sentence it matches agree on negation (can / cannot).

A claim passes only if all four hold. Filler ("Here is what I found:") is ignored, but only when it
carries no content word, number or entity, so filler cannot smuggle a fact past the check.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from guardrag.config.run_config import RunConfig
from guardrag.core.embedder import Embedder


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --- thresholds (calibrated with scripts/score_grounding.py; see datasets/grounding/README.md) ---

#: Cosine similarity between a claim and its best source unit: the run knob's default (its
#: calibration is described there).
DEFAULT_MIN_SIMILARITY: float = RunConfig.model_fields["grounding_min_similarity"].default
#: Share of the claim's content words present in the source unit. The sharpest knee: correct
#: paraphrases keep >= 0.6 of them, invented details ("instant", "airline miles") fall to <= 0.5;
#: 0.5 lets one through, 0.7 rejects 4% of correct answers.
DEFAULT_MIN_OVERLAP = 0.6
#: A sentence ending in ":" with at most this many content words and no verb is a lead-in
#: ("Steps to verify your card:"): only its numbers and entities are checked.
LEAD_IN_MAX_WORDS = 5
#: Words either side of a number that say what the number is about (for the swap check).
NUMBER_CONTEXT_WORDS = 3
#: Weight of a clause's words farther from a number than NUMBER_CONTEXT_WORDS.
FAR_CONTEXT_WEIGHT = 0.5
#: A source sentence "says what the claim says" when it holds this share of the claim's content
#: words (and passes min_similarity); if its polarity differs, the claim is a negation flip.
NEGATION_COVERAGE = 0.6
#: Texts per embedding call (sorted by length); smaller batches waste less padding.
EMBED_BATCH = 8
#: Relative tolerance when comparing parsed amounts (RM 5,000 == RM 5000.00).
VALUE_TOLERANCE = 1e-9

# --- citations and splitting ---

#: [1], [1,2], [1, 2], [1-3], [1;2]; adjacent brackets [1][2] are two matches.
CITATION_RE = re.compile(r"\[\s*(\d+(?:\s*(?:,|;|-|–|and)\s*\d+)*)\s*\]")
_CITATION_RANGE_RE = re.compile(r"(\d+)\s*[-–]\s*(\d+)")
#: Sentence end: terminal punctuation, closing quotes, then citations that belong to the sentence
#: before ("... 5 days. [1] Next ...") and whitespace.
_SENTENCE_END_RE = re.compile(r"[.!?]+[\"')\]”’]*((?:\s*\[[\d,;\s–-]+\])*)\s+")
#: Abbreviations whose full stop does not end a sentence.
ABBREVIATIONS = _wordset(
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
#: Clause boundaries inside a sentence (used to bind a number to what it is about).
_CLAUSE_RE = re.compile(r",(?!\d)|[;:()]|\s(?:and|but|or|while|whereas|whilst)\s")

# --- lexical ---

_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
STOPWORDS = _wordset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just me more most
    my myself of off on once only other our ours out over same she so some such than that the
    their theirs them then there these they this those through to too under until up very was we
    were what when where which while who whom why with would you your yours yourself yourselves
    will shall via upon within per us every each let lets i'm you're it's that's there's can able
    """
)
#: Words that only talk about the answer itself. They never count as content, so "Based on the
#: sources, the fee is RM 1" is judged on "fee" and "RM 1" alone.
FILLER_WORDS = _wordset(
    """here found based according source sources passage passages provided information document
    documents context cited citation citations summary summarise summarize answer answers following
    hope helps help note please sure certainly below mentioned stated states say says said yes
    okay ok
    """
)
#: Leading phrases stripped before embedding a claim (they dilute its meaning).
_FILLER_PREFIX_RE = re.compile(
    r"^(?:(?:yes|sure|certainly|okay|ok)\b[,!.]?\s*"
    r"|(?:here(?:'s| is| are) (?:what i found|the answer|a summary)[^:,.]*[:,.]?\s*)"
    r"|(?:(?:based on|according to|as (?:stated|mentioned|noted) in|per) (?:the )?(?:provided |given )?"
    r"(?:sources?|passages?|documents?|information|context|faq|knowledge base)\s*[:,]?\s*)"
    r"|(?:in (?:summary|short)|to summari[sz]e|please note(?: that)?|note that)\s*[:,]?\s*)",
    re.IGNORECASE,
)
#: Whole sentences of politeness, ignored when they carry no number or entity.
_FILLER_SENTENCE_RE = re.compile(
    r"^(?:i hope (?:this|that) helps|hope (?:this|that) helps|let me know\b.*"
    r"|feel free to (?:ask|reach out|contact|let)\b.*|is there anything else\b.*"
    r"|happy to help\b.*|thank you\b.*|thanks\b.*)[.!?]*$",
    re.IGNORECASE,
)
#: A lead-in with one of these is a statement, not a heading ("Withdrawals are free:").
_VERB_HINTS = _wordset(
    "is are was were be been can cannot must should may will has have do does charge charges "
    "require requires apply applies need needs"
)

#: Words that make the right side of ", and" a statement rather than a list item.
_CLAUSE_HINTS = _VERB_HINTS | _wordset(
    "also only never it they you we there this these he she its their your earn earns get gets "
    "cost costs take takes pay pays"
)

# --- polarity ---

#: Negation cues; a claim and the source sentence that says the same must have as many.
NEGATION_RE = re.compile(
    r"\b(?:not|no|never|cannot|none|nor|neither|nobody|nothing|without|unable|non)\b|n't\b"
    # prohibitions: "should avoid X" denies "can X" as surely as "should not X" does
    r"|\b(?:avoid(?:s|ed|ing)?|prohibit(?:s|ed)?|forbid(?:s|den)?|refrain(?:s|ed)?|banned)\b"
)

#: Bounds that read as negation but are not ("no later than 30 days" == "within 30 days").
_NOT_NEGATION_RE = re.compile(
    r"\b(?:no|not)\s+(?:later|earlier|more|less|fewer|longer|greater|sooner)\s+than\b"
    r"|\bnot only\b|\bnot even\b|\bno matter\b|\b[Nn]o\.(?=\S|\s+\d)"  # "Plate No.", "No. 5"
)
_ANSWER_WORD_RE = re.compile(r"^\s*(?:yes|no)\b[,.!]?\s*")

# --- conditions on "free" ---

#: A claim or clause saying something costs nothing.
_FREE_RE = re.compile(
    r"\b(?:free|no (?:fees?|charges?|cost)|without (?:any )?(?:fees?|charges?)"
    r"|at no (?:extra )?cost|costs? nothing)\b",
    re.IGNORECASE,
)
#: A clause that charges: a fee word (and, checked apart, a figure).
_FEE_RE = re.compile(r"\b(?:fees?|charges?|charged|costs?|carry|carries)\b", re.IGNORECASE)
#: A claim that states its own exception ("free except by credit card") keeps the condition.
_EXCEPTION_RE = re.compile(
    r"\b(?:except|only|but|unless|apart from|other than|excluding)\b", re.IGNORECASE
)
_PRICE_WORDS = frozenset({"fre", "fe", "charg", "cost"})

# --- entities ---

_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'’&][A-Za-z0-9]+)*\+?")
#: "RM5000" is an amount (checked as a number), not a name.
_AMOUNT_TOKEN_RE = re.compile(r"(?:RM|MYR|USD|SGD)\d[\dA-Za-z]*", re.IGNORECASE)
#: Capitalised words that are not names even mid-sentence.
ENTITY_STOPWORDS = _wordset("i rm myr usd sgd am pm ok yes no please note step steps faq id")
MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4,
    "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9,
    "sept": 9, "september": 9, "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12,
    "december": 12,
}  # fmt: skip

# --- numbers ---

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fourteen": 14, "fifteen": 15,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90,
}  # fmt: skip
_UNIT_WORDS = (
    r"%|percent|ringgit|sen|am|pm|(?:business|working|banking|calendar)[\s-](?:days?|hours?)|days?|hours?"
    r"|hrs?|minutes?|mins?|seconds?|secs?|weeks?|months?|years?|digits?|times|points?|pts"
)
#: A number word becomes a digit only before a unit ("two business days"), never alone ("no one").
_NUMBER_WORD_RE = re.compile(
    r"\b(" + "|".join(_NUMBER_WORDS) + r")(?=[\s-](?:" + _UNIT_WORDS + r")\b)"
)
_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))
_DATE_RE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH_ALT})"
    rf"|(?P<m2>{_MONTH_ALT})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?)\b(?![:\d])"
)
NUMBER_RE = re.compile(
    r"(?<![a-z0-9.,])(?:(?P<cur>rm|myr|usd|sgd|us\$|s\$|\$)\s?)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?::\d{2})?(?:\.\d+)?)(?:st|nd|rd|th)?"
    r"(?:\s?(?P<mult>k|mil|million|bil|billion|bn)\b)?"
    r"(?:[\s-]?(?P<unit>" + _UNIT_WORDS + r"))?(?![a-z0-9])"
    r"(?:\s+(?:a|an)\s+(?P<rate>day|week|month|year)\b)?"
)
#: Frequencies ("daily limit", "per month"): a claim's frequency must be the passage's.
FREQUENCY_RE = re.compile(
    r"\b(?:per|each|every)\s+(?P<unit>day|week|month|year|annum|transaction)\b"
    r"|\b(?P<adj>daily|weekly|monthly|yearly|annually|annual|hourly)\b"
)
_FREQUENCY_CANON = {
    "daily": "day", "weekly": "week", "monthly": "month", "yearly": "year", "annually": "year",
    "annual": "year", "annum": "year", "hourly": "hour",
}  # fmt: skip
_CURRENCY = {
    "rm": "MYR", "myr": "MYR", "usd": "USD", "us$": "USD", "$": "USD", "sgd": "SGD", "s$": "SGD",
}  # fmt: skip
_MULTIPLIER = {"k": 1e3, "mil": 1e6, "million": 1e6, "bil": 1e9, "billion": 1e9, "bn": 1e9}
_DURATION = {
    "day": "day", "hour": "hour", "hr": "hour", "minute": "minute", "min": "minute",
    "second": "second", "sec": "second", "week": "week", "month": "month", "year": "year",
}  # fmt: skip
#: "working days" == "business days" == "banking days"; all differ from calendar "days".
_BUSINESS = ("business", "working", "banking")


# ------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Passage:
    """A source passage as the model saw it: `number` is the [n] it may cite (1-based)."""

    number: int
    source_id: str
    text: str


@dataclass(frozen=True)
class ClaimSupport:
    """The verdict on one claim, with the evidence: what the audit trail shows."""

    claim: str
    cited: tuple[int, ...]
    best_passage: int | None
    similarity: float
    overlap: float
    numbers_ok: bool
    entities_ok: bool
    supported: bool
    reason: str
    facts_only: bool = False  # a lead-in ("Ways to reload:"): only its numbers/entities count

    @property
    def hard_failure(self) -> bool:
        """Failed on what no judge may overrule: a number, an entity, negation, a citation."""
        return not (self.numbers_ok and self.entities_ok) or "negation differs" in self.reason

    @property
    def score(self) -> float:
        """Support score: the similarity of a supported claim, 0.0 for an unsupported one."""
        return self.similarity if self.supported else 0.0


@dataclass(frozen=True)
class GroundingReport:
    """The answer is supported only if every judged claim is and every citation is valid.

    score: the lowest claim score (0.0 if any claim fails or nothing was judged).
    ignored: filler that was not judged, and lead-ins ("Ways to reload:") of which only numbers
    and entities were checked; listed so the trail is complete.
    """

    supported: bool
    score: float
    claims: tuple[ClaimSupport, ...]
    invalid_citations: tuple[int, ...]
    reason: str
    ignored: tuple[str, ...] = ()

    def cited_numbers(self) -> set[int]:
        """The passages the supported claims rest on: those they cite, or for an uncited claim
        the passage that supports it (what the answer shows as its sources)."""
        return {
            n
            for c in self.claims
            if c.supported
            for n in (c.cited or ((c.best_passage,) if c.best_passage else ()))
        }


@dataclass(frozen=True)
class Mention:
    """A parsed number: kind is money | percent | duration | time | date | count | number (bare)."""

    kind: str
    value: float | str
    unit: str
    rate: str | None  # "day" in "RM 500 per day"
    surface: str
    start: int
    end: int

    def label(self) -> str:
        return re.sub(r"^(rm|myr|usd|sgd)", lambda m: m.group(1).upper(), self.surface.strip())


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


def _strip_citations(text: str) -> str:
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


def _lines(text: str) -> list[str]:
    """Non-empty lines, bullets and markdown emphasis removed; a heading line ("## Fees",
    "**Fees**") becomes a lead-in ("Fees:") so it is not judged as a claim."""
    text = text.replace("\u00a0", " ").replace("\u200b", "")
    text = _HEADING_RE.sub(lambda m: (m.group(1) or m.group(2)).rstrip(":") + ":", text)
    text = _MARKDOWN_RE.sub("", text)
    return [_BULLET_RE.sub("", line).strip() for line in text.splitlines() if line.strip()]


def _claim_parts(sentence: str) -> list[str]:
    """A sentence split on ";" and on ", and/but ..." where both sides are full statements."""
    parts: list[str] = []
    for piece in _SEMICOLON_RE.split(sentence):
        chunks = _COORDINATION_RE.split(piece)  # text, separator, text, ...
        merged = [chunks[0]]
        for separator, chunk in zip(chunks[1::2], chunks[2::2], strict=True):
            right = _strip_citations(chunk)
            statement = (
                len(content_words(_strip_citations(merged[-1]))) >= MIN_CLAUSE_WORDS
                and len(content_words(right)) >= MIN_CLAUSE_WORDS
                and bool(set(_words(right)) & _CLAUSE_HINTS)
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
    for line in _lines(answer):
        for sentence in split_sentences(line):
            parts = [(_strip_citations(p), parse_citations(p)) for p in _claim_parts(sentence)]
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


def _clauses(text: str) -> list[tuple[int, int]]:
    """Character spans of the clauses of `text` (split on punctuation and conjunctions)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _CLAUSE_RE.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


# --------------------------------------------------------------------------------- lexical


def _stem(word: str) -> str:
    """A deliberately crude stemmer: enough to match fee/fees, verify/verified, charge/charges."""
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif (len(word) > 4 and word.endswith("ed")) or (len(word) > 3 and word.endswith("es")):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 7 and word.endswith("al"):
        word = word[:-2]  # withdrawal -> withdraw, approval -> approv(e)
    if len(word) > 2 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # transferred -> transferr -> transfer
    return word


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower().replace("’", "'"))


def content_words(text: str) -> set[str]:
    """Stemmed content words: no stopwords, filler, negation cues or bare numbers."""
    out: set[str] = set()
    for word in _words(text):
        word = word.removesuffix("'s")
        if (
            len(word) < 2  # "a.m." splits into letters
            or word in STOPWORDS
            or word in FILLER_WORDS
            or word.endswith("n't")
            or NEGATION_RE.fullmatch(word)
            or any(ch.isdigit() for ch in word)
        ):
            continue
        out.add(_stem(word))
    return out


def negation_cues(text: str) -> int:
    """How many negation cues (not, no, never, cannot, can't, without...) the text has.

    Claims are compared by count, not by presence: "should not avoid ... without balance" (2)
    flips "should avoid ... without balance" (1). A leading "Yes,"/"No," answers the question and
    is not the claim's polarity; "no later than" and "Plate No." are not negations.
    """
    text = _NOT_NEGATION_RE.sub(" ", text.replace("’", "'"))
    text = _ANSWER_WORD_RE.sub("", text.lower())
    return len(NEGATION_RE.findall(text))


# ---------------------------------------------------------------------------------- numbers


def _number_text(text: str) -> str:
    """Lowercased text where number words before a unit are digits, a.m./p.m. are am/pm."""
    text = text.lower().replace("’", "'").replace("–", "-").replace("—", "-")
    text = text.replace("\u00a0", " ").replace("a.m.", "am").replace("p.m.", "pm")
    text = text.replace("per cent", "percent")
    return _NUMBER_WORD_RE.sub(lambda m: str(_NUMBER_WORDS[m.group(1)]), text)


def _duration_unit(unit: str) -> str:
    words = unit.split()
    base = words[-1] if words[-1] in _DURATION else words[-1].removesuffix("s")
    prefix = "business " if words[0] in _BUSINESS else ""
    return prefix + _DURATION.get(base, base)


def _parse_value(raw: str, mult: str | None) -> float:
    value = float(raw.replace(",", ""))
    return value * _MULTIPLIER.get(mult or "", 1.0)


def _time_of_day(raw: str, unit: str | None) -> float:
    hours, _, minutes = raw.replace(".", ":").partition(":")
    h, m = int(hours), int(minutes or 0)
    if unit == "pm" and h < 12:
        h += 12
    if unit == "am" and h == 12:
        h = 0
    return float(h * 60 + m)


def extract_mentions(text: str) -> list[Mention]:
    """Every amount, percentage, period, time, date and bare number in `text`, normalised.

    "RM5,000", "RM 5000", "5,000 ringgit" and "MYR 5k" are all (money, 5000, MYR); "two business
    days" and "2 working days" are (duration, 2, business day); "50 sen" is (money, 0.5, MYR).
    """
    norm = _number_text(text)
    mentions: list[Mention] = []
    for match in _DATE_RE.finditer(norm):
        day = match.group("d1") or match.group("d2")
        month = MONTHS[match.group("m1") or match.group("m2")]
        date = f"{month:02d}-{int(day):02d}"
        mentions.append(Mention("date", date, "", None, match.group(0), *match.span()))
        norm = norm[: match.start()] + " " * len(match.group(0)) + norm[match.end() :]
    for match in NUMBER_RE.finditer(norm):
        raw, cur, mult = match.group("num"), match.group("cur"), match.group("mult")
        unit = (match.group("unit") or "").replace("-", " ")
        kind, canon = "number", ""
        if ":" in raw or unit in ("am", "pm"):
            mentions.append(
                Mention("time", _time_of_day(raw, unit), "", None, match.group(0), *match.span())
            )
            continue
        value = _parse_value(raw, mult)
        if cur or unit in ("ringgit", "sen"):
            kind, canon = "money", _CURRENCY.get(cur or "rm", "MYR")
            if unit == "sen":
                value /= 100
        elif unit in ("%", "percent"):
            kind = "percent"
        elif unit in ("digit", "digits", "times", "point", "points", "pts"):
            kind, canon = "count", unit.rstrip("s").replace("pt", "point")
        elif unit:
            kind, canon = "duration", _duration_unit(unit)
        mentions.append(
            Mention(kind, value, canon, match.group("rate"), match.group(0), *match.span())
        )
    _link_ranges(norm, mentions)
    return [_with_rate(norm, m) for m in mentions]


def _link_ranges(norm: str, mentions: list[Mention]) -> None:
    """In "1 to 3 business days" or "RM 10 - 500" both ends share the unit written once."""
    ordered = sorted(range(len(mentions)), key=lambda i: mentions[i].start)
    for i, j in itertools.pairwise(ordered):
        a, b = mentions[i], mentions[j]
        if not re.fullmatch(r"\s*(?:-|to|and|or|until)\s*", norm[a.end : b.start]):
            continue
        if a.kind == "number" and b.kind not in ("number", "date", "time"):
            mentions[i] = Mention(b.kind, a.value, b.unit, a.rate, a.surface, a.start, a.end)
        elif b.kind == "number" and a.kind in ("money", "percent"):
            mentions[j] = Mention(a.kind, b.value, a.unit, b.rate, b.surface, b.start, b.end)


def _with_rate(norm: str, m: Mention) -> Mention:
    """Attach the frequency written in the same clause ("RM 500 per day", "daily limit of RM 500")."""
    if m.rate or m.kind in ("duration", "time", "date"):
        return m
    for a, b in _clauses(norm):
        if a <= m.start < b:
            freqs = [(abs(f.start() - m.start), f) for f in FREQUENCY_RE.finditer(norm, a, b)]
            if freqs:
                f = min(freqs, key=lambda x: x[0])[1]
                unit = f.group("unit") or _FREQUENCY_CANON[f.group("adj")]
                rate = _FREQUENCY_CANON.get(unit, unit)
                return Mention(m.kind, m.value, m.unit, rate, m.surface, m.start, m.end)
    return m


def frequencies(text: str) -> set[str]:
    """Canonical frequencies mentioned anywhere: {"day", "month", "transaction", ...}."""
    out = set()
    for f in FREQUENCY_RE.finditer(_number_text(text)):
        unit = f.group("unit") or _FREQUENCY_CANON[f.group("adj")]
        out.add(_FREQUENCY_CANON.get(unit, unit))
    for m in re.finditer(r"\b(?:a|an)\s+(day|week|month|year)\b", _number_text(text)):
        out.add(m.group(1))
    return out


def _same_value(a: float | str, b: float | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(a - b) <= VALUE_TOLERANCE * max(1.0, abs(a), abs(b))


def _matches(claim: Mention, source: Mention) -> bool:
    """Same value; same kind and unit unless the claim's number is bare; no clashing frequency."""
    if not _same_value(claim.value, source.value):
        return False
    if claim.kind == "number":
        return source.kind not in ("date", "time")
    if (claim.kind, claim.unit) != (source.kind, source.unit):
        return False
    return not (claim.rate and source.rate and claim.rate != source.rate)


# --------------------------------------------------------------------------------- entities


def _entity_key(token: str) -> str:
    key = token.lower().replace("’", "'").removesuffix("'s")
    key = re.sub(r"[-'&+]", "", key)
    return str(MONTHS.get(key, key))


def extract_entities(text: str) -> list[str]:
    """Capitalised names, products and acronyms, skipping sentence-initial words and a stoplist.

    A sentence-initial word counts only if it is an acronym or has inner capitals (DuitNow, eKYC):
    otherwise "Transfers settle..." would demand the word "Transfers" verbatim.
    """
    out: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        token = match.group(0)
        before = text[: match.start()].rstrip()
        initial = not before or before[-1] in ".:!?\"“'‘(-•*"
        inner_caps = any(ch.isupper() for ch in token[1:]) and len(token) > 1
        capitalised = token[0].isupper()
        if token.lower() in ENTITY_STOPWORDS or _AMOUNT_TOKEN_RE.fullmatch(token):
            continue
        if inner_caps or (capitalised and not initial):
            out.append(token)
    return out


def _entity_index(text: str) -> set[str]:
    keys: set[str] = set()
    for match in _TOKEN_RE.finditer(text):
        key = _entity_key(match.group(0))
        keys.update({key, _stem(key)})
        keys.update(_stem(p) for p in re.split(r"[-'’&]", match.group(0).lower()) if p)
    return keys


# ----------------------------------------------------------------------------------- checking


@dataclass(frozen=True)
class _Clause:
    number: int  # the passage
    text: str
    sentence: str  # the sentence it belongs to (its embedding breaks ties)
    words: frozenset[str]
    mentions: tuple[Mention, ...]


@dataclass(frozen=True)
class _Source:
    """One passage, pre-split: sentences (units), clauses (for number binding), facts."""

    passage: Passage
    sentences: tuple[str, ...]
    words: dict[str, frozenset[str]]  # content words of each sentence
    clauses: tuple[_Clause, ...]
    mentions: tuple[Mention, ...]
    frequencies: frozenset[str]
    entities: frozenset[str]


def _prepare(passage: Passage) -> _Source:
    """Split a passage once per check: sentences, their words, clauses, numbers, names."""
    sentences = tuple(
        _strip_citations(s) for line in _lines(passage.text) for s in split_sentences(line)
    ) or (passage.text,)
    clauses = [
        _Clause(
            passage.number,
            s[a:b],
            s,
            frozenset(content_words(s[a:b])),
            tuple(extract_mentions(s[a:b])),
        )
        for s in sentences
        for a, b in _clauses(s)
    ]
    return _Source(
        passage=passage,
        sentences=sentences,
        words={x: frozenset(content_words(x)) for x in sentences},
        clauses=tuple(clauses),
        mentions=tuple(extract_mentions(passage.text)),
        frequencies=frozenset(frequencies(passage.text)),
        entities=frozenset(_entity_index(passage.text)),
    )


@dataclass(frozen=True)
class _Unit:
    """What a claim is compared with: one sentence, a whole passage, or several passages."""

    numbers: tuple[int, ...]  # passages it comes from
    sentences: tuple[str, ...]
    words: frozenset[str]


def _units(sources: Sequence[_Source]) -> list[_Unit]:
    """Sentences, whole passages and (for several cited passages) all of them together."""
    units: list[_Unit] = []
    for src in sources:
        n = (src.passage.number,)
        units += [_Unit(n, (s,), src.words[s]) for s in src.sentences]
        if len(src.sentences) > 1:
            words = frozenset().union(*src.words.values())
            units.append(_Unit(n, src.sentences, words))
    if len(sources) > 1:
        numbers = tuple(s.passage.number for s in sources)
        sentences = tuple(x for s in sources for x in s.sentences)
        words = frozenset().union(*(s.words[x] for s in sources for x in s.sentences))
        units.append(_Unit(numbers, sentences, words))
    return units


def _unit_vector(unit: _Unit, vectors: dict[str, np.ndarray]) -> np.ndarray:
    """A multi-sentence unit is the normalised mean of its sentences: one embedding per sentence,
    never one per passage (long texts dominate the cost of a batch)."""
    if len(unit.sentences) == 1:
        return vectors[unit.sentences[0]]
    mean = np.mean([vectors[s] for s in unit.sentences], axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-12)


def _cite_label(numbers: Iterable[int]) -> str:
    return "".join(f"[{n}]" for n in numbers)


def _number_problem(claim: str, sources: Sequence[_Source], sentence_sim: dict[str, float]) -> str:
    """Why the claim's numbers are not those of the sources, or "" if they are."""
    label = _cite_label(s.passage.number for s in sources)
    pool = [m for s in sources for m in s.mentions]
    mentions = extract_mentions(claim)
    for m in mentions:
        if not any(_matches(m, p) for p in pool):
            return f"number {m.label()} not in passage {label}"
    known = set().union(*(s.frequencies for s in sources))
    for freq in sorted(frequencies(claim) - known):
        return f"frequency 'per {freq}' not in passage {label}"
    return _swap_problem(claim, mentions, sources, sentence_sim)


def _swap_problem(
    claim: str, mentions: list[Mention], sources: Sequence[_Source], sentence_sim: dict[str, float]
) -> str:
    """A number that is in the passage but bound to something else there: "daily limit RM 20,000"
    when it says "daily limit RM 5,000, monthly limit RM 20,000".

    The clause a claim's number is about is the source clause sharing most of the words around the
    number (near words count double); ties go to the clause whose sentence is closest in meaning.
    It is a conflict only if that clause states another value of the same kind that the claim does
    not also state ("from RM 5,000 to RM 10,000" names both) and no clause holding the claim's
    value ranks as high.
    """
    norm = _number_text(claim)
    clauses = [c for s in sources for c in s.clauses]
    for m in mentions:
        near, far = _number_context(norm, m, mentions)
        if m.kind == "number" or not near | far:
            continue
        ranked = [
            (
                len(near & c.words) + FAR_CONTEXT_WEIGHT * len(far & c.words),
                round(sentence_sim.get(c.sentence, 0.0), 6),
                c,
            )
            for c in clauses
        ]
        best = max((w, s) for w, s, _ in ranked)
        if best[0] == 0:
            continue
        holding = [(w, s) for w, s, c in ranked if any(_matches(m, x) for x in c.mentions)]
        if holding and max(holding) >= best:
            continue
        for w, s, c in ranked:
            rivals = [
                x
                for x in c.mentions
                if (w, s) == best and x.kind == m.kind and not any(_matches(y, x) for y in mentions)
            ]
            if rivals:
                return (
                    f"number {m.label()} conflicts with passage [{c.number}], which says "
                    f"{rivals[0].label()}: '{c.text.strip()}'"
                )
    return ""


def _number_context(norm: str, m: Mention, mentions: list[Mention]) -> tuple[set[str], set[str]]:
    """Content words of the number's clause: the few nearest it, and the rest."""
    for a, b in _clauses(norm):
        if a <= m.start < b:
            left, right = norm[a : m.start], norm[m.end : b]
            for other in mentions:  # other numbers and their units are not context
                left = left.replace(other.surface, " ")
                right = right.replace(other.surface, " ")
            lw = [_stem(w) for w in _words(left) if content_words(w)]
            rw = [_stem(w) for w in _words(right) if content_words(w)]
            near = set(lw[-NUMBER_CONTEXT_WORDS:] + rw[:NUMBER_CONTEXT_WORDS])
            return near, set(lw + rw) - near
    return set(), set()


def _entity_problem(claim: str, sources: Sequence[_Source]) -> str:
    known = set().union(*(s.entities for s in sources))
    for entity in extract_entities(claim):
        key = _entity_key(entity)
        if key not in known and _stem(key) not in known:
            label = _cite_label(s.passage.number for s in sources)
            return f"entity '{entity}' not in passage {label}"
    return ""


def _omitted_fee_problem(claim: str, sources: Sequence[_Source]) -> str:
    """ "Top-ups are free" where the passage makes some top-ups free and charges for others: the
    claim drops the condition. Passes when the claim names what sets the free ones apart
    ("FPX top-ups are free") or states the exception itself."""
    if not _FREE_RE.search(claim) or _EXCEPTION_RE.search(claim):
        return ""
    words = content_words(claim) - _PRICE_WORDS
    for src in sources:
        if not words <= frozenset().union(*src.words.values()):
            continue  # the claim is about something this passage does not talk about
        clauses = [c for s in src.sentences for c in (_claim_parts(s) or [s])]
        free = [(c, content_words(c)) for c in clauses if _FREE_RE.search(c)]
        charged = [
            (c, content_words(c)) for c in clauses if _FEE_RE.search(c) and re.search(r"\d", c)
        ]
        for free_clause, free_words in free:
            for clause, fee_words in charged:
                if clause == free_clause:
                    continue  # "free for the first 5, then RM0.50" states its own condition
                if words & free_words & fee_words and not words & (free_words - fee_words):
                    n = src.passage.number
                    return (
                        f"says free, but passage [{n}] charges for some of it: '{clause.strip()}'"
                    )
    return ""


def _unit_negation_problem(
    words: set[str], negations: int, unit: _Unit, sentence_sim: dict[str, float]
) -> str:
    """A claim supported only by several sentences together (a title and a guideline) keeps the
    polarity of the one closest in meaning: "Promotions can show only benefits" takes its words
    from "Promotions guide" and "...should avoid presenting benefits without balance"."""
    statements = [
        s
        for s in unit.sentences
        if words & content_words(s) and (set(_words(s)) & _VERB_HINTS or negation_cues(s))
    ]  # a heading ("Promotions guide > crypto") has no polarity to keep
    if not statements:
        return ""
    closest = max(statements, key=sentence_sim.__getitem__)
    if negation_cues(closest) == negations:
        return ""
    return f"negation differs from passage {_cite_label(unit.numbers)}: '{closest}'"


def _negation_problem(
    words: set[str],
    negations: int,
    sources: Sequence[_Source],
    sentence_sim: dict[str, float],
    min_similarity: float,
) -> str:
    """The source sentence that says what the claim says (near-total word coverage, similar
    meaning) has the opposite polarity. A sentence of the same polarity that matches as well wins:
    "Reloads are free. Reloads are not free on weekends." supports "Reloads are free"."""
    if not words:
        return ""
    matching: list[tuple[float, bool, str, int]] = []
    for src in sources:
        for sentence in src.sentences:
            sim = sentence_sim[sentence]
            # The source is split the way claims are, so "X is free [1]" taken from
            # "X is free, and there is no Y fee" is compared with its own clause, not with "no".
            parts = _claim_parts(sentence)
            for text in (sentence, *parts) if len(parts) > 1 else (sentence,):
                part_words = src.words[sentence] if text == sentence else content_words(text)
                coverage = len(words & part_words) / len(words)
                if coverage >= NEGATION_COVERAGE and sim >= min_similarity:
                    same = negation_cues(text) == negations
                    matching.append((round(coverage + sim, 6), same, sentence, src.passage.number))
    if not matching:
        return ""
    top = max(m[0] for m in matching)
    leaders = [m for m in matching if m[0] == top]
    if any(same for _, same, _, _ in leaders):
        return ""
    _, _, sentence, number = leaders[0]
    return f"negation differs from passage [{number}]: '{sentence}'"


def _embed_text(claim: str) -> str:
    text = claim
    while (stripped := _FILLER_PREFIX_RE.sub("", text, count=1)) != text:
        text = stripped
    return text or claim


def _is_filler(claim: str) -> bool:
    """No content word, number or entity: nothing to verify ("Here is what I found:")."""
    if extract_mentions(claim) or extract_entities(claim):
        return False
    return not content_words(claim) or _FILLER_SENTENCE_RE.match(claim.strip()) is not None


def _is_lead_in(claim: str) -> bool:
    """A short heading ending in ":" with no verb ("Steps to verify your card:")."""
    words = set(_words(claim))
    return (
        claim.rstrip().endswith(":")
        and len(content_words(claim)) <= LEAD_IN_MAX_WORDS
        and not words & _VERB_HINTS
    )


@dataclass(frozen=True)
class _Thresholds:
    min_similarity: float
    min_overlap: float


def _judge(
    claim: str,
    cited: tuple[int, ...],
    sources: Sequence[_Source],
    vectors: dict[str, np.ndarray],
    limits: _Thresholds,
    facts_only: bool,
) -> tuple[ClaimSupport, float]:
    """Judge one claim against one candidate set of passages (its citations, or one passage).

    Returns the verdict and how close it came (to pick the most telling failure to report).
    """
    words = content_words(claim)
    claim_vec = vectors[_embed_text(claim)]
    sentence_sim = {x: float(claim_vec @ vectors[x]) for s in sources for x in s.sentences}
    number_problem = _number_problem(claim, sources, sentence_sim)
    entity_problem = _entity_problem(claim, sources)
    negations = negation_cues(_embed_text(claim))
    negation_problem = "" if facts_only else _negation_problem(
        words, negations, sources, sentence_sim, limits.min_similarity
    )  # fmt: skip

    best: tuple[float, float, float, _Unit] | None = None  # rank, similarity, overlap, unit
    for unit in _units(sources):
        sim = float(claim_vec @ _unit_vector(unit, vectors))
        overlap = len(words & unit.words) / len(words) if words else 1.0
        passes = sim >= limits.min_similarity and overlap >= limits.min_overlap
        closeness = min(
            sim / max(limits.min_similarity, 1e-6), overlap / max(limits.min_overlap, 1e-6), 1.0
        )
        rank = (2.0 if passes else 0.0) + closeness + sim * 1e-3  # ties go to meaning
        if best is None or rank > best[0]:
            best = (rank, sim, overlap, unit)
    assert best is not None  # every passage yields at least one sentence
    rank, sim, overlap, unit = best
    matched = rank >= 2.0
    if matched and not negation_problem and len(unit.sentences) > 1 and not facts_only:
        negation_problem = _unit_negation_problem(words, negations, unit, sentence_sim)
    in_passage = max(
        ((sentence_sim[x], s.passage.number) for s in sources for x in s.sentences
         if s.passage.number in unit.numbers),
    )[1]  # fmt: skip
    label = _cite_label(unit.numbers)
    if number_problem or entity_problem or negation_problem:
        reason = number_problem or entity_problem or negation_problem
    elif facts_only:
        reason = "lead-in: only its numbers and entities are checked"
    elif matched:
        reason = f"supported by passage {label}"
    elif sim < limits.min_similarity:
        reason = f"similarity {sim:.2f} < {limits.min_similarity:.2f} to passage {label}"
    else:
        missing = ", ".join(sorted(words - unit.words)[:5])
        reason = (
            f"overlap {overlap:.2f} < {limits.min_overlap:.2f} with passage {label}"
            f" (missing: {missing})"
        )
    supported = not (number_problem or entity_problem or negation_problem) and (
        facts_only or matched
    )
    support = ClaimSupport(
        claim=claim,
        cited=cited,
        best_passage=in_passage,
        similarity=round(sim, 4),
        overlap=round(overlap, 4),
        numbers_ok=not number_problem,
        entities_ok=not entity_problem,
        supported=supported,
        reason=reason,
        facts_only=facts_only,
    )
    return support, rank - (1.0 if number_problem or entity_problem else 0.0)


def _judge_claim(
    text: str,
    cites: tuple[int, ...],
    by_number: dict[int, _Source],
    vectors: dict[str, np.ndarray],
    limits: _Thresholds,
    facts_only: bool,
    require_citations: bool,
) -> ClaimSupport:
    """Judge against the cited passages together, or (uncited) against each passage alone."""

    def fail(reason: str) -> ClaimSupport:
        return ClaimSupport(text, cites, None, 0.0, 0.0, False, False, False, reason)

    missing = [n for n in cites if n not in by_number]
    if missing:
        return fail(f"cites missing passage {_cite_label(missing)}")
    if not cites and require_citations and not facts_only:
        return fail("no citation")
    if not by_number:
        return fail("no passages given")
    candidates = [[by_number[n] for n in cites]] if cites else [[s] for s in by_number.values()]
    judged = [_judge(text, cites, c, vectors, limits, facts_only) for c in candidates]
    chosen = next((j for j, _ in judged if j.supported), None)
    if chosen is None:
        chosen = max(judged, key=lambda x: x[1])[0]
    # "free" must hold against every passage given, not only the one that supports it
    problem = "" if facts_only else _omitted_fee_problem(text, list(by_number.values()))
    if chosen.supported and problem:
        chosen = replace(chosen, supported=False, reason=f"claim not supported ({problem})")
    if not cites:  # say so in the trail: uncited claims are matched against every passage
        prefix = "uncited, " if chosen.supported else "uncited; "
        chosen = replace(chosen, reason=prefix + chosen.reason)
    return chosen


def _embed_all(embedder: Embedder, texts: set[str]) -> dict[str, np.ndarray]:
    """Embed in small batches of similar length: a batch is padded to its longest text, and one
    long FAQ sentence in a batch of 50 made the whole check 3x slower (measured)."""
    ordered = sorted(texts, key=len)
    vectors: dict[str, np.ndarray] = {}
    for i in range(0, len(ordered), EMBED_BATCH):
        batch = ordered[i : i + EMBED_BATCH]
        vectors.update(zip(batch, embedder.embed(batch), strict=True))
    return vectors


def check_grounding(
    answer: str,
    passages: Sequence[Passage],
    embedder: Embedder,
    *,
    min_similarity: float = DEFAULT_MIN_SIMILARITY,
    min_overlap: float = DEFAULT_MIN_OVERLAP,
    require_citations: bool = False,
) -> GroundingReport:
    """Decide whether `answer` is supported by `passages`, claim by claim.

    Supported iff every citation names a given passage, at least one claim was judged, and every
    claim is supported by the passages it cites (an uncited claim by any one passage; with
    `require_citations` an uncited claim fails). One embedding call: claims and source sentences.
    """
    by_number = {p.number: _prepare(p) for p in passages}
    raw_claims = split_claims(answer)
    invalid = tuple(sorted({n for _, cites in raw_claims for n in cites if n not in by_number}))

    judged: list[tuple[str, tuple[int, ...], bool]] = []  # claim, cites, facts_only (lead-in)
    ignored: list[str] = []
    for text, cites in raw_claims:
        if not text:
            continue
        if _is_filler(text) or _is_lead_in(text):
            ignored.append(text)
        if not _is_filler(text):
            judged.append((text, cites, _is_lead_in(text)))

    texts = {_embed_text(c) for c, _, _ in judged}
    texts.update(x for src in by_number.values() for x in src.sentences)
    vectors = _embed_all(embedder, texts)

    limits = _Thresholds(min_similarity, min_overlap)
    results = [
        _judge_claim(text, cites, by_number, vectors, limits, facts_only, require_citations)
        for text, cites, facts_only in judged
    ]
    return summarise(results, invalid, tuple(ignored))


def summarise(
    results: Sequence[ClaimSupport], invalid: tuple[int, ...], ignored: tuple[str, ...] = ()
) -> GroundingReport:
    """The report on an answer from the verdicts on its claims (and its invalid citations)."""
    factual = [c for c in results if not c.facts_only]
    failing = next((c for c in results if not c.supported), None)
    if invalid:
        reason = f"citation {_cite_label(invalid)} refers to no given passage"
    elif not factual:
        reason = "answer makes no checkable claim"
    elif failing is not None:
        reason = f"claim not supported ({failing.reason}): '{failing.claim}'"
    else:
        reason = f"all {len(factual)} claims supported"
    supported = not invalid and bool(factual) and failing is None
    return GroundingReport(
        supported=supported,
        score=round(min(c.score for c in factual), 4) if supported else 0.0,
        claims=tuple(results),
        invalid_citations=invalid,
        reason=reason,
        ignored=ignored,
    )


#: Content words an uncited claim's supporting passage lacks that another passage must supply
#: for that passage to be cited too.
MIN_COMPLEMENT_WORDS = 2


def drawn_on(report: GroundingReport, passages: Sequence[Passage]) -> set[int]:
    """The passages the answer rests on: `cited_numbers()`, plus, for an uncited claim that
    combines passages ("clear, prominent warnings [1] help consumers understand losses [2]"),
    every other passage supplying at least MIN_COMPLEMENT_WORDS of the claim's content words
    that its supporting passage lacks."""
    numbers = report.cited_numbers()
    words_of = {p.number: content_words(p.text) for p in passages}
    for claim in report.claims:
        if not claim.supported or claim.cited or claim.best_passage is None:
            continue
        missing = content_words(claim.claim) - words_of.get(claim.best_passage, set())
        numbers.update(
            number
            for number, words in words_of.items()
            if number != claim.best_passage and len(missing & words) >= MIN_COMPLEMENT_WORDS
        )
    return numbers
