"""Typos read as the knowledge base's own words before the question is embedded.

"how do i chnage my pasword" embeds as unrelated word pieces ("ch", "##nage") and lands far from
"How do I change my password?". A question word is respelt when neither the KB nor an English
word list knows it and one edit (a letter added, dropped or changed, or two letters swapped)
makes it a word the KB uses; among several such words, the one most entries use. The word list
is the whole lower-case words of MiniLM's tokenizer (about 22,000 of its 30,522 entries), which
ships with the embedder: a real word the KB happens not to use ("dinner" beside the KB's
"diner") is never "corrected" into another one, nor is a known word with an English ending the
list leaves out ("smoker", "refunds") or a contraction typed without its apostrophe ("whats",
"doesnt"). Left alone: words under five letters (too many neighbours: "ussd" is one edit from
"used"), a capitalised word inside the sentence (a name: the domain gate must still see a
name the KB never mentions) and a word with a capital after its first letter (an identifier:
"appID", "eKYC").
"""

from __future__ import annotations

import functools
import json
import re
import string
from dataclasses import dataclass

from guardrag.core.embedder import EmbedderUnavailable, default_model_files
from guardrag.core.kb.stats import KBStats
from guardrag.core.text import stem

MIN_LETTERS = 5
#: The share of a question's other words that must be English or the KB's for a typo to be read.
MIN_KNOWN_SHARE = 2 / 3
#: Endings that make a known word another real one: inflections and derivations the word list
#: leaves out ("smoker", "refunds"), and contractions typed without the apostrophe ("whats",
#: "doesnt", "youre", "theyll").
_ENDINGS = ("s", "es", "d", "ed", "r", "er", "ers", "ing", "ly", "nt", "re", "ll", "ve")
_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Respelt:
    """The question with its typos respelt, and each typo with the KB word it became."""

    question: str
    changes: dict[str, str]


@functools.cache
def english_words() -> frozenset[str]:
    """The whole (lower-case, alphabetic) words of MiniLM's tokenizer; empty when it is not
    installed (then nothing is respelt: without a word list a real word could be)."""
    try:
        _, tokenizer = default_model_files()
        vocab = json.loads(tokenizer.read_text(encoding="utf-8"))["model"]["vocab"]
    except (EmbedderUnavailable, OSError, KeyError, ValueError):
        return frozenset()
    return frozenset(word for word in vocab if word.isalpha() and word.islower())


def _is_known(word: str, known: frozenset[str]) -> bool:
    """An English word, or a known word with one of `_ENDINGS` ("smoker", "whats")."""
    return word in known or any(
        word.endswith(end) and word[: -len(end)] in known for end in _ENDINGS
    )


def one_edit(word: str) -> set[str]:
    """Every string one letter added, dropped, changed or two neighbours swapped from `word`."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    letters = string.ascii_lowercase
    dropped = {a + b[1:] for a, b in splits if b}
    swapped = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    changed = {a + c + b[1:] for a, b in splits if b for c in letters}
    added = {a + c + b for a, b in splits for c in letters}
    return (dropped | swapped | changed | added) - {word}


def respell(question: str, stats: KBStats, known: frozenset[str] | None = None) -> Respelt:
    """`question` with every typo respelt as a word of the KB `stats` describe; `known`: the
    English word list (MiniLM's, by default). Nothing is respelt in a question whose other
    words are not mostly English or the KB's (`MIN_KNOWN_SHARE`): a typo is an unknown word
    among known ones, and a Malay question's "laluan" is no misspelt "Labuan"."""
    known = english_words() if known is None else known
    if not known:
        return Respelt(question, {})
    words = [(m.start(), m.group(0)) for m in _WORD.finditer(question)]
    changes = {
        word: fixed
        for start, word in words
        if (fixed := _respelt(word, _is_name_or_identifier(word, start), stats, known)) is not None
    }
    others = [word for _, word in words if word not in changes]
    familiar = sum(_is_known(w.lower(), known) or w.lower() in stats.vocabulary for w in others)
    if not changes or familiar < MIN_KNOWN_SHARE * len(others):
        return Respelt(question, {})
    respelt = _WORD.sub(lambda m: changes.get(m.group(0), m.group(0)), question)
    return Respelt(respelt, changes)


def _is_name_or_identifier(word: str, start: int) -> bool:
    """A capitalised word inside the sentence, or one with an inner capital (an identifier)."""
    return (start > 0 and word[0].isupper()) or not word[1:].islower()


def _respelt(word: str, named: bool, stats: KBStats, known: frozenset[str]) -> str | None:
    """The KB word one edit from `word` (the one most entries use), when `word` is a typo: no
    name, five letters or more, known neither to the word list nor to the KB."""
    lower = word.lower()
    if named or len(lower) < MIN_LETTERS or _is_known(lower, known) or lower in stats.vocabulary:
        return None
    close = one_edit(lower) & stats.vocabulary
    return min(close, key=lambda w: (-stats.doc_freq.get(stem(w), 0), w)) if close else None
