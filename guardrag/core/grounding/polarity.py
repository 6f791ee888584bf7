"""A "Yes" must agree with the passage it rests on.

A small model answers a yes/no question with "Yes" and then copies the passage's words: "Yes,
someone with a rectal mass does not need FIT" (asked "does ... need FIT?"), or "Yes, it is an
urgent referral" where the passage says "Consider routine referral". Every word of the claim is
in the passage, so similarity and overlap pass it; the "Yes" is what is wrong. The passage's
sentence that holds most of the question's words is read for what contradicts the question:

- a negation just before one of the question's own words ("do not need", "non-urgent",
  "should not be offered"), or
- a contrasting qualifier in place of the one asked about (asked "urgent", the passage says
  "routine"; asked "mandatory", it says "optional").

A "No" is not checked by words: it usually rests on what the passage leaves out ("only a
routine referral"), which no word list tells from an affirmation. A question that is itself
negated ("Doesn't it need ...?") is left alone: its "Yes" is ambiguous.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from guardrag.core.grounding.lexicon import NEGATION_RE, NOT_NEGATION_RE, negation_cues
from guardrag.core.text import coverage, stem, words

_YES = re.compile(r"^\W*yes\b", re.IGNORECASE)
#: Words a negation cue reaches, past little words ("not need", "not to be offered").
REACH = 2
_LITTLE = frozenset(["to", "be", "a", "an", "the", "any"])
#: Qualifiers of which a passage saying one contradicts a "Yes" to a question asking the other.
CONTRASTS: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(a.split()), frozenset(b.split()))
    for a, b in (
        ("urgent urgently", "routine routinely"),
        ("mandatory compulsory required obligatory", "optional voluntary discretionary"),
        ("always", "sometimes occasionally never rarely"),
        ("permitted allowed", "prohibited forbidden banned"),
        ("immediate immediately", "later deferred"),
    )
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")


def yes_conflict(question: str, draft: str, passage: str) -> str | None:
    """Why a draft opening with "Yes" contradicts `passage`, or None (no "Yes", a negated
    question, or no contradiction found)."""
    if not _YES.match(draft) or negation_cues(question) > 0:
        return None
    sentence = evidence_sentence(question, passage)
    if not sentence:
        return None
    asked = {stem(w) for w in words(question)}
    negated = negated_words(sentence) & asked
    if negated:
        return f"'Yes' contradicts the passage, which negates '{sorted(negated)[0]}': '{sentence}'"
    said = set(words(sentence))
    for one, other in (*CONTRASTS, *((b, a) for a, b in CONTRASTS)):
        wanted = one & set(words(question))
        instead = other & said
        if wanted and instead and not one & said:
            return (
                f"'Yes' contradicts the passage, which says '{sorted(instead)[0]}' where the "
                f"question asks '{sorted(wanted)[0]}': '{sentence}'"
            )
    return None


def evidence_sentence(question: str, passage: str) -> str:
    """The sentence of `passage` that holds most of the question's words (the first on a tie)."""
    sentences = [s.strip() for line in passage.splitlines() for s in _SENTENCE.split(line)]
    sentences = [s for s in sentences if s]
    if not sentences:
        return ""
    scores = [coverage(question, s) for s in sentences]
    return sentences[scores.index(max(scores))]


def negated_words(sentence: str) -> set[str]:
    """Stems of the words within REACH after a negation cue ("do not need" -> {"need"})."""
    text = NOT_NEGATION_RE.sub(" ", sentence.replace("’", "'"))
    tokens = words(text)
    found: set[str] = set()
    for i, token in enumerate(tokens):
        if NEGATION_RE.fullmatch(token) or token.endswith("n't"):
            found.update(stem(t) for t in _reach(tokens, i + 1))
    return found


def _reach(tokens: Sequence[str], start: int) -> list[str]:
    return [t for t in tokens[start : start + 2 * REACH] if t not in _LITTLE][:REACH]
