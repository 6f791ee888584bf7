"""Per-snapshot statistics of a knowledge base: its vocabulary and word document frequencies.

Computed once per published snapshot from the points themselves (so they follow every
re-ingest) and shared by `classify` (names the KB never mentions), `rerank` (IDF weights)
and `exact_match` (the KB's own name, which a customer may leave out).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from guardrag.core.store import VectorStore
from guardrag.core.text import content_words, normalise, stem

_WORD = re.compile(r"[a-z0-9]+")
MIN_CORRECTABLE = 5  # shorter words have too many close neighbours to correct safely
SPELLING_CUTOFF = 0.85  # difflib ratio; "acounts"/"account" is 0.86, "loan"/"lean" would not do
#: Two words are one when they share this many first letters: the crude stemmer leaves a noun
#: and its verb or adjective apart ("eligibility"/"eligible", "notification"/"notify" do not).
SAME_ROOT = 6


def joined_words(text: str) -> set[str]:
    """Words, and runs of two or three glued together, so "Grab Pay" matches "GrabPay" and
    "Touch 'n Go" matches "touchngo"."""
    words = _WORD.findall(normalise(text))
    runs = {"".join(words[i : i + n]) for n in (2, 3) for i in range(len(words) - n + 1)}
    return set(words) | runs


#: Passage texts whose words are kept: rerank scores the same hits for every question (and
#: calibration for every probe), and stemming them again was two thirds of its time.
WORDS_CACHED = 4096


@functools.lru_cache(maxsize=WORDS_CACHED)
def _words_in(text: str) -> frozenset[str]:
    """A passage's content words and glued runs, as `idf_coverage` matches them."""
    return frozenset(content_words(text)) | frozenset(joined_words(text))


@dataclass(frozen=True)
class KBStats:
    snapshot_id: str
    vocabulary: frozenset[str]
    doc_freq: dict[str, int]
    n_docs: int
    #: The KB's own name ("kinetic", "wallet" of "Kinetic Wallet"): see `own_name_words`.
    own_names: frozenset[str] = frozenset()
    _spelling: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_texts(
        cls, snapshot_id: str, texts: Iterable[str], questions: Iterable[str] = ()
    ) -> KBStats:
        """Statistics of the points' texts; `questions` (the FAQ entries') give its own name."""
        vocabulary: set[str] = set()
        doc_freq: Counter[str] = Counter()
        n_docs = 0
        for text in texts:
            n_docs += 1
            vocabulary |= joined_words(text)
            doc_freq.update(set(content_words(text)))
        own = own_name_words(list(questions))
        return cls(snapshot_id, frozenset(vocabulary), dict(doc_freq), n_docs, own)

    def idf(self, word: str) -> float:
        """BM25-style IDF; a word the KB never uses weighs the most."""
        return math.log((self.n_docs + 1) / (self.doc_freq.get(word, 0) + 0.5))

    def canonical(self, word: str) -> str:
        """The KB's spelling of a misspelt query word ("acounts" -> "account"), else the word.

        Only words of 5+ letters the KB never uses are corrected, and only to a close match.
        """
        if len(word) < MIN_CORRECTABLE or word in self.doc_freq or word in self.vocabulary:
            return word
        if word not in self._spelling:
            close = difflib.get_close_matches(
                word, self.doc_freq.keys(), n=1, cutoff=SPELLING_CUTOFF
            )
            self._spelling[word] = close[0] if close else word
        return self._spelling[word]

    def idf_coverage(self, query: str, text: str) -> float:
        """IDF-weighted share of the query's content words found in `text`.

        Covering "fee" matters; covering the KB's own brand name (in every entry) barely does.
        Misspellings are corrected against the KB, and "topup" matches "top up".
        """
        wanted = {self.canonical(w) for w in content_words(query)}
        if not wanted:
            return 0.0
        present = _words_in(text)
        total = sum(self.idf(w) for w in wanted)
        return sum(self.idf(w) for w in wanted if w in present) / total if total else 0.0

    def known_coverage(self, query: str, text: str) -> float:
        """`idf_coverage` over the query's words that the KB uses at all: a word no entry
        holds (lay wording: "trouble swallowing" against "dysphagia") can be in no passage's
        sentence, so its absence says nothing about which sentence answers."""
        wanted = {self.canonical(w) for w in content_words(query)}
        wanted = {w for w in wanted if w in self.doc_freq}
        present = _words_in(text)
        total = sum(self.idf(w) for w in wanted)
        return sum(self.idf(w) for w in wanted if w in present) / total if total else 0.0

    @functools.cached_property
    def _roots(self) -> frozenset[str]:
        """The first letters of the KB's words (not of glued runs: "word in" is no "wording")."""
        return frozenset(w[:SAME_ROOT] for w in self.doc_freq if len(w) >= SAME_ROOT)

    def names(self, word: str) -> bool:
        """Whether the KB uses `word` in some form: its stem, glued ("record-keeping" =
        "recordkeeping") or each of its parts, or a word of the same root ("eligibility",
        "eligible"). What a question asks for by name is checked against it
        (guardrag.core.grounding.kind.focus_unnamed)."""
        parts = [p for p in word.lower().removesuffix("'s").split("-") if p]
        glued = "".join(parts)
        if glued in self.vocabulary or stem(glued) in self.doc_freq:
            return bool(parts)
        return bool(parts) and all(self._uses(part) for part in parts)

    def _uses(self, word: str) -> bool:
        if word in self.vocabulary or stem(word) in self.doc_freq:
            return True
        return len(word) >= SAME_ROOT and word[:SAME_ROOT] in self._roots

    def unknown_names(self, query: str) -> list[str]:
        """Names and acronyms in the query ("Apple's", "TNB") that the KB never uses."""
        from guardrag.core.grounding.entities import (  # lazy: grounding is slow to import
            entity_key,
            extract_entities,
        )

        return [
            name
            for name in extract_entities(query)
            if name.lower().removesuffix("'s") not in self.vocabulary
            and (key := entity_key(name)) not in self.vocabulary
            and self.canonical(stem(key)) not in self.doc_freq
        ]


#: A capitalised word mid-question in this share of a KB's FAQ questions is part of its own
#: name (ewallet: "Kinetic" 21%, "Wallet" 19%; telco: "Nimbus" 20%); a topic word is seldom
#: capitalised, a product or place named in a few entries is under it.
OWN_NAME_SHARE = 0.1
#: At most this many name words (the most frequent): a key is looked up with each subset.
OWN_NAME_WORDS = 3
_CAPITALISED = re.compile(r"(?<=[\w,;:)] )[A-Z][\w-]*")


def own_name_words(questions: list[str]) -> frozenset[str]:
    """The content words of the KB's own name, as its FAQ questions spell it mid-sentence
    ("How do I close my Kinetic Wallet account?"): a customer leaves them out ("How do I close
    my account?") and asks the same question."""
    counts: Counter[str] = Counter()
    for question in questions:
        counts.update({w for name in _CAPITALISED.findall(question) for w in content_words(name)})
    floor = max(2, OWN_NAME_SHARE * len(questions))
    common = [w for w, n in counts.most_common() if n >= floor]
    return frozenset(common[:OWN_NAME_WORDS])


def point_text(payload: dict[str, object]) -> str:
    return f"{payload.get('title') or ''} {payload.get('text') or ''}"


class KBStatsCache:
    """Statistics per KB, recomputed when the KB's snapshot id changes."""

    def __init__(self) -> None:
        self._stats: dict[str, KBStats] = {}
        self._lock = threading.Lock()

    def peek(self, kb: str) -> KBStats | None:
        """The statistics last computed for `kb` (classify computes them for every question)."""
        with self._lock:
            return self._stats.get(kb)

    def get(self, store: VectorStore, kb: str, snapshot_id: str) -> KBStats:
        with self._lock:
            cached = self._stats.get(kb)
            if cached is None or cached.snapshot_id != snapshot_id:
                payloads = list(store.payloads(kb))
                cached = KBStats.from_texts(
                    snapshot_id,
                    (point_text(p) for p in payloads),
                    (
                        str(p["question"])
                        for p in payloads
                        if p.get("kind") == "faq" and p.get("question")
                    ),
                )
                self._stats[kb] = cached
            return cached
