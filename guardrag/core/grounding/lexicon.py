"""The words a claim is judged on: content words (no stopwords, filler, negation cues or
numbers) and negation cues."""

from __future__ import annotations

import re

from guardrag.core.text import stem, words, wordset

CLAIM_STOPWORDS = wordset(
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
FILLER_WORDS = wordset(
    """here found based according source sources passage passages provided information document
    documents context cited citation citations summary summarise summarize answer answers following
    hope helps help note please sure certainly below mentioned stated states say says said yes
    okay ok
    """
)

# --- polarity ---

#: Negation cues; a claim and the source sentence that says the same must have as many.
NEGATION_RE = re.compile(
    r"\b(?:not|no|never|cannot|none|nor|neither|nobody|nothing|without|unable|non)\b|n't\b"
    # prohibitions: "should avoid X" denies "can X" as surely as "should not X" does
    r"|\b(?:avoid(?:s|ed|ing)?|prohibit(?:s|ed)?|forbid(?:s|den)?|refrain(?:s|ed)?|banned)\b"
)

#: Bounds that read as negation but are not ("no later than 30 days" == "within 30 days").
NOT_NEGATION_RE = re.compile(
    r"\b(?:no|not)\s+(?:later|earlier|more|less|fewer|longer|greater|sooner)\s+than\b"
    r"|\bnot only\b|\bnot even\b|\bno matter\b|\b[Nn]o\.(?=\S|\s+\d)"  # "Plate No.", "No. 5"
)
ANSWER_WORD_RE = re.compile(r"^\s*(?:yes|no)\b[,.!]?\s*")

# --------------------------------------------------------------------------------- lexical

#: A bound before a figure, read as the word "minimum" or "maximum": "at least 500 points"
#: states what "a minimum of 500 points" does, "up to RM500" what "a maximum of RM500" does.
_FIGURE_AHEAD = r"(?=\s+(?:of\s+)?(?:rm|usd|us\$|\$|£|€)?\s?\d)"
_BOUNDS = (
    (re.compile(r"\b(?:at\s+least|(?:no|not)\s+(?:less|fewer)\s+than)" + _FIGURE_AHEAD,
                re.IGNORECASE), "minimum"),
    (re.compile(r"\b(?:at\s+most|up\s+to|(?:no|not)\s+more\s+than)" + _FIGURE_AHEAD,
                re.IGNORECASE), "maximum"),
)  # fmt: skip
#: The direction of a bound is checked as a scope (checks.SCOPES), not counted as a content word:
#: passages also bound a figure as a "limit" or a "cap", and the figure is checked as a number.
BOUND_WORDS = wordset("minimum maximum")


def bound_words(text: str) -> str:
    """`text` with each bound on a figure written "minimum" or "maximum", so a claim that turns
    a passage's minimum into a maximum ("at most 500 points" from "a minimum of 500 points")
    changes its scope however the two are worded."""
    for pattern, word in _BOUNDS:
        text = pattern.sub(word, text)
    return text


def content_words(text: str) -> set[str]:
    """Stemmed content words: no stopwords, filler, negation cues, bounds or bare numbers."""
    out: set[str] = set()
    for word in words(bound_words(text)):
        word = word.removesuffix("'s")
        if (
            len(word) < 2  # "a.m." splits into letters
            or word in CLAIM_STOPWORDS
            or word in BOUND_WORDS
            or word in FILLER_WORDS
            or word.endswith("n't")
            or NEGATION_RE.fullmatch(word)
            or any(ch.isdigit() for ch in word)
        ):
            continue
        out.add(stem(word))
    return out


def negation_cues(text: str) -> int:
    """How many negation cues (not, no, never, cannot, can't, without...) the text has.

    Claims are compared by count, not by presence: "should not avoid ... without balance" (2)
    flips "should avoid ... without balance" (1). A leading "Yes,"/"No," answers the question and
    is not the claim's polarity; "no later than" and "Plate No." are not negations.
    """
    text = NOT_NEGATION_RE.sub(" ", text.replace("’", "'"))
    text = ANSWER_WORD_RE.sub("", text.lower())
    return len(NEGATION_RE.findall(text))
