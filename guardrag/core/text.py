"""Text normalisation for matching: exact keys, content words and lexical coverage."""

from __future__ import annotations

import re
import unicodedata

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
    text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).lower()
    return " ".join(_NON_WORD.sub(" ", text).replace("'", "").split())


def _stem(word: str) -> str:
    """A deliberately light stemmer (plurals, -ing, -ed, final e): enough for word overlap.

    "warnings", "warning" and "warned" all become "warn"; "requires" and "required" "requir".
    """
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """Lower-cased, lightly stemmed words that are not stopwords, in order."""
    words = _WORD.findall(normalise(text))
    return [_stem(w) for w in words if w not in STOPWORDS and len(w) > 1]


def question_key(text: str) -> str:
    """Stage-2 (near-exact) key: sorted content words, so trivial rephrasings collide."""
    return " ".join(sorted(set(content_words(text))))


def coverage(query: str, text: str) -> float:
    """Share of the query's content words that occur in `text` (0 when the query has none)."""
    wanted = set(content_words(query))
    if not wanted:
        return 0.0
    return len(wanted & set(content_words(text))) / len(wanted)
