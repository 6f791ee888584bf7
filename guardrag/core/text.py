"""Text for matching, one set of rules for every stage: normalised keys, words, one stemmer,
content words and lexical coverage (grounding builds its claim words on the same pieces)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_APOSTROPHES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u02bc": "'",
        "`": "'",
        "\u00b4": "'",
        "\u201c": '"',
        "\u201d": '"',
    }
)
_NON_WORD = re.compile(r"[^\w']+")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

#: Function words that carry no topic; dropping them makes "How do I top up?" == "how to top up".
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "about",
        "as",
        "into",
        "onto",
        "over",
        "under",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "doing",
        "done",
        "have",
        "has",
        "had",
        "having",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "i",
        "me",
        "my",
        "mine",
        "we",
        "us",
        "our",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "it",
        "its",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "there",
        "here",
        "please",
        "pls",
        "plz",
        "kindly",
        "tell",
        "me",
        "explain",
        "know",
        "want",
        "need",
        "get",
        "able",
        "any",
        "some",
        "just",
        "also",
        "so",
        "than",
        "then",
        "too",
        "very",
        "much",
        "many",
        "more",
        "most",
        "such",
        "own",
        "same",
        "other",
        "only",
        "not",
        "no",
        "nor",
    ]
)


def normalise(text: str) -> str:
    """Case, Unicode form, apostrophes, punctuation and whitespace folded: stage-1 exact key."""
    return " ".join(_NON_WORD.sub(" ", fold(text)).replace("'", "").split())


def stem(word: str) -> str:
    """A deliberately crude stemmer: enough to match fee/fees, verify/verified, charge/charges,
    warnings/warned, withdrawal/withdraw, transferred/transfer."""
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


def straighten(text: str) -> str:
    """Unicode form and apostrophes folded (a curly "firm’s" is "firm's"); case kept."""
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)


def fold(text: str) -> str:
    """Unicode form, apostrophes and case folded; punctuation kept."""
    return straighten(text).lower()


def words(text: str) -> list[str]:
    """Lower-case word tokens, a trailing clitic kept ("can't", "it's")."""
    return _WORD.findall(fold(text))


def content_words(text: str) -> list[str]:
    """Lightly stemmed words that are not question stopwords, in order."""
    return [stem(w.replace("'", "")) for w in words(text) if w not in STOPWORDS and len(w) > 1]


def question_key(text: str, extra: Iterable[str] = ()) -> str:
    """Stage-2 (near-exact) key: sorted content words (and `extra` ones, the KB's own name left
    out), so trivial rephrasings collide."""
    return " ".join(sorted(set(content_words(text)) | set(extra)))


def coverage(query: str, text: str) -> float:
    """Share of the query's content words that occur in `text` (0 when the query has none)."""
    wanted = set(content_words(query))
    if not wanted:
        return 0.0
    return len(wanted & set(content_words(text))) / len(wanted)


def wordset(text: str) -> frozenset[str]:
    """A frozenset of the whitespace-separated words of `text` (for word lists in source)."""
    return frozenset(text.split())


#: The words that say what a question asks for, each with its kind ("which" asks what "what"
#: does; "how much" asks a figure, which "how" alone does not).
_KIND_OF = {
    "what": "what",
    "whats": "what",
    "what's": "what",
    "which": "what",
    "where": "where",
    "when": "when",
    "why": "why",
    "who": "who",
    "whom": "who",
    "whose": "who",
    "how": "how",
}
_HOW_FIGURE = wordset("much many long often old soon far")
_YES_NO = wordset(
    """do does did can can't could is isn't are aren't was were will won't would should may
    might must have has am shall"""
)


def question_kind(text: str) -> str:
    """What a question asks for: its first question word ("how", "how much", "why", "where",
    "what" ...), "yes-no" when it opens with an auxiliary ("Do I have COVID-19?"), "keywords"
    when every word is a content word ("freeze membership"), "" for any other statement
    ("coronavirus is from"). Two wordings with the same content words ask the same thing only
    when they ask it the same way: "Where is the coronavirus from?" is not "What is a
    coronavirus?", "Why can't I close my account?" is not "How do I close it?"."""
    tokens = words(text)
    for i, token in enumerate(tokens):
        kind = _KIND_OF.get(token)
        if kind == "how" and i + 1 < len(tokens) and tokens[i + 1] in _HOW_FIGURE:
            return f"how {tokens[i + 1]}"
        if kind is not None:
            return kind
    if tokens and tokens[0] in _YES_NO:
        return "yes-no"
    return "keywords" if tokens and len(content_words(text)) == len(tokens) else ""


#: "What is fraud?", "What are e-wallets?", "Who is Goofy?": a request for a definition of a
#: short subject and nothing more ("What is the APN?", "What is the fee for ..." ask a value).
_DEFINITION = re.compile(
    r"^\s*(?:what|who)(?:'s|\s+(?:is|are))\s+(?:an?\s+)?"
    r"(?P<subject>[\w-]+(?:\s+[\w-]+){0,2})\s*\??\s*$",
    re.IGNORECASE,
)
_NOT_A_SUBJECT = wordset(
    """fee fees limit limits cost price charge minimum maximum the my your our for of on in to
    with at from by"""
)
_WHAT_IS = re.compile(r"^\s*(?:what|who)(?:'s|\s+(?:is|are)\b)", re.IGNORECASE)


def opens_as_definition(text: str) -> bool:
    """Whether `text` opens like a definition ("What is Near Me on TNG eWallet?"): an FAQ entry
    asked that way can answer what something is."""
    return _WHAT_IS.match(text) is not None


def asks_for_definition(text: str) -> bool:
    """Whether `text` only asks what something is ("What is identity theft?")."""
    match = _DEFINITION.match(text)
    return match is not None and not set(words(match["subject"])) & _NOT_A_SUBJECT


#: Where a message asks a second question: "..., and can I ...", "... and what is ...",
#: "...? Also, how ...". The second part must open like a question of its own.
_SECOND_QUESTION = re.compile(
    r"(?:[,;]?\s+and\s+|\?\s*(?:and\s+|also,?\s+)?|[.;]\s*also,?\s+|,?\s+also,?\s+)"
    r"(?=(?:how|what|what's|whats|when|where|why|which|who|if)\b"
    # an auxiliary opens a question only before its subject: "and can I", not "and is using"
    r"|(?:can|could|do|does|did|is|are|was|will|would|should)\s+"
    r"(?:i|you|we|they|it|he|she|there|this|that|my|your|our|the|a|an|any)\b)",
    re.IGNORECASE,
)
#: A part needs this many content words to be searched on its own ("and how?" is not a part).
MIN_PART_WORDS = 2
MAX_PARTS = 3


def question_parts(text: str) -> list[str]:
    """The questions a message asks, when it asks two or three ("When is my bill due and can
    I set up autopay?"); [] for a single question."""
    parts = [p.strip(" ,;?.") for p in _SECOND_QUESTION.split(text.strip())]
    parts = [p for p in parts if p]
    if not 2 <= len(parts) <= MAX_PARTS:
        return []
    if any(len(content_words(p)) < MIN_PART_WORDS for p in parts):
        return []
    return [p + "?" for p in parts]
