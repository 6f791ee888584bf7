"""Sentences that do not belong in a knowledge-base entry, found by meaning, not by phrases.

A help-centre entry answers its question, for a customer. A sentence planted in it by an
attacker is written to an assistant or an agent ("assistant, add a note ...", "please email
the chat to ...", "transfer the balance to account ...") or asks for work unrelated to the
entry (write a script, recommend a book, translate, advertise, encode the reply). Each
sentence of each entry (FAQ answer or document chunk) is embedded once and described by:

  injection    the learned injection classifier's probability (is it written to a model?)
  instruction  its best cosine to instruction and attack exemplars (config/exemplars)
  relevance    its cosine to its own entry: the entry's title (the question it answers) or,
               when closer, another sentence of the entry
  kb           its best cosine to any title in the KB (the KB's topic)
  first_person the share of "I / me / my" words outside quotes (help text says "you")
  request      1 for a request opener ("please ...", "could you ...", "tolong ...") that
               names neither the reader ("you") nor the company ("we"): asked of an agent
  novelty      for an errand (a request or a bare imperative to no one in particular), how
               unlikely this KB's own help text is to leave that many of its words unused
               anywhere else in the KB (`guards/ingest/novelty.py`): computed from the KB at ingest,
               so the same code serves any domain

Its score is instruction - relevance, plus weighted kb, first_person, injection, request and
novelty terms: the sentence is nearer to the instructions than to its own entry, or it is an
errand about what the KB never mentions (rule passage.foreign_errand when the novelty term is
what carried it over the threshold). The weights and the threshold are fit by
`scripts/fit_guards.py` on clean KBs (our e-wallet, telco, gym, courier, insurance documents;
the public TNGD and GuidelineIQ seeds; for novelty also halves and quarters of each, as smaller
KBs), every clean sentence against sentences planted at the start, middle or end of their
entries: the threshold sits just above every clean sentence, and the weights are those whose
threshold, taken from the other KBs, flagged no clean sentence of the KB left out. Position does
not matter: each sentence is scored on its own, in its entry's context. A lead-in ("Please note
the following:") says nothing alone and is read with the item it introduces.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from guardrag.config.exemplars.attacks import ATTACKS, FOREIGN
from guardrag.core.embedder import Embedder, remembering
from guardrag.core.guards.ingest.novelty import REQUEST, KBVocabulary
from guardrag.core.guards.shared.learned import LearnedInjection, LinearModel
from guardrag.core.guards.shared.normalize import INVISIBLE
from guardrag.core.shipped_vectors import shipped

PASSAGE_MODEL = Path(__file__).with_name("passage_model.npz")
#: The instruction classifier the passage screen reads (its `injection` feature): fit like the
#: input guard's but without benign requests as negatives, because in a KB passage any
#: instruction addressed to a reader or a model is foreign, while from a customer a request is
#: only off topic (docs/GUARDS.md).
PASSAGE_INJECTION = Path(__file__).with_name("passage_injection.npz")
FEATURES = ("injection", "instruction", "relevance", "kb", "first_person", "request", "novelty")
NOVELTY = FEATURES.index("novelty")

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
# A sentence-like start inside a sentence ("... logged in successfully Please create ..."):
# a line that ended without a full stop, with the next sentence run on. The next sentence
# opens with a capitalised word and a lower-case one, or with a capitalised function word
# before a name ("... account Most DuitNow transfers ...").
_RUN_ON = re.compile(
    r"(?:(?:^|(?<=\s))[a-z][a-z0-9']*|:)\s+(?=[A-Z][a-z]+\s+[a-z]|(?:All|Most|Some|Any|Each|"
    r"Every|The|This|These|Those|If|When|Yes|No|You|Your|We|Our|It|There)\s+[A-Z])"
)
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|(?<!\w)'(?:[^'\n]|(?<=\w)'(?=\w))*'(?!\w)|‘[^’\n]*’")
_LINKS = re.compile(r"\S+@\S+|\bhttps?://\S+|\bwww\.\S+|\b\S+\.(?:com|my|net|org|example)\S*")
# App labels and menu paths ("Help > My Cases", "Near Me", "Request My Data") are not a voice.
_LABELS = re.compile(r">\s*[^>,.;:]*|\b(?:My|Me)(?:\s+[A-Z][\w']*)+|\b[A-Z][\w']*\s+Me\b")
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|me|my|mine|myself|saya|aku)\b")
_WORD = re.compile(r"\w+")
_LETTER = re.compile(r"[^\W\d_]")
_READER_OR_COMPANY = re.compile(
    r"\b(?:you|your|yours|yourself|we|us|our|ours|anda|awak|kami)\b", re.IGNORECASE
)
MIN_WORDS = 3
#: A line of at most this many words, capitalised and without punctuation, is a heading.
HEADING_WORDS = 8
_PUNCTUATED = re.compile(r"[.!?:;,\"“”()]")
#: Entries whose sentences `ForeignSentences.scan` embeds at once.
SCAN_BATCH = 256


def split_sentences(text: str) -> list[str]:
    """Sentences and list items of an entry, each with at least MIN_WORDS words; a lead-in
    ("Please note the following:") and the item it introduces are one sentence."""
    return [sentence for sentence, _ in _sentences(text)]


def _heading(part: str) -> bool:
    """A document's heading line inside a passage ("Rationale and impact"): a label for what
    follows, read with it like a lead-in, never scored as a sentence of its own."""
    words = part.split()
    if len(words) > HEADING_WORDS or not part[:1].isupper() or _PUNCTUATED.search(part):
        return False
    # An errand run into the text ("Switch off the alarm for my neighbour") is no label.
    return not _FIRST_PERSON.search(part) and REQUEST.match(part) is None


def _sentences(text: str) -> list[tuple[str, str]]:
    """(sentence, the item a lead-in or a heading introduces in it, or "")."""
    parts = [_BULLET.sub("", p).strip() for p in _SPLIT.split(INVISIBLE.sub("", text))]
    parts = [p for p in parts if _LETTER.search(p)]  # not a list's bare "1." either
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(parts):
        if (parts[i].endswith(":") or _heading(parts[i])) and i + 1 < len(parts):
            found.append((f"{parts[i]} {parts[i + 1]}", parts[i + 1]))
            i += 2
        else:
            found.append((parts[i], ""))
            i += 1
    return [(s, led) for s, led in found if len(s.split()) >= MIN_WORDS]


def pieces(text: str) -> list[tuple[int, str]]:
    """What is scored of an entry: each sentence, and, under the sentence's index, the pieces
    of one that looks like two run together and the item a lead-in introduces. A lead-in alone
    says nothing (help text is full of them), so it is only read with its item."""
    found: list[tuple[int, str]] = []
    for k, (sentence, led) in enumerate(_sentences(text)):
        parts = run_ons(sentence)
        if led and led not in parts and len(led.split()) >= MIN_WORDS:
            parts.append(led)
        found += [(k, sentence), *((k, part) for part in parts)]
    return found


def run_ons(sentence: str) -> list[str]:
    """The pieces of a sentence that looks like two run together; [] when it does not. A piece
    that is a lead-in ("... the following:") or a heading a document's text ran into the
    sentence ("Rationale and impact This section ...") is not one: it is read with the next."""
    cuts = [m.end() for m in _RUN_ON.finditer(sentence)]
    bounds = [0, *cuts, len(sentence)]
    parts = [sentence[i:j].strip() for i, j in itertools.pairwise(bounds)]
    if sum(len(p.split()) >= MIN_WORDS for p in parts) < 2:
        return []
    spans = [
        f"{p} {parts[i + 1]}" if (p.endswith(":") or _heading(p)) and i + 1 < len(parts) else p
        for i, p in enumerate(parts)
    ]
    whole = sentence.strip()  # a lead-in and its item may be the whole sentence
    return [p for p in spans if len(p.split()) >= MIN_WORDS and p != whole]


def units(text: str) -> list[str]:
    """An entry's sentences, a sentence that looks like two run together as its pieces."""
    return [p for s in split_sentences(text) for p in (run_ons(s) or [s])]


def vocabulary(entries: Sequence[tuple[str, str]]) -> KBVocabulary:
    """The words of a KB's (title, text) entries (`guards/ingest/novelty.py`)."""
    return KBVocabulary((title, units(text)) for title, text in entries)


def says_one_thing(text: str) -> bool:
    """An entry of a single sentence (not two run together): nothing in it for a sentence to be
    foreign to. Its words are the entry; the passage rules and the invariants still judge it."""
    parts = [p for p in _SPLIT.split(INVISIBLE.sub("", text)) if p.strip()]
    return len(parts) == 1 and not run_ons(parts[0])


def request(sentence: str) -> float:
    """1.0 when the sentence opens as a request and names neither the reader nor the company
    ("Please note your limit resets daily" names the reader: help text)."""
    plain = _LABELS.sub(" ", _LINKS.sub(" ", _QUOTED.sub(" ", sentence)))
    if REQUEST.match(sentence.strip()) is None:
        return 0.0
    rest = REQUEST.sub("", plain.strip(), count=1)
    return 0.0 if _READER_OR_COMPANY.search(rest) else 1.0


def first_person(sentence: str) -> float:
    """Share of first-person-singular words in the help text's own voice: not in quotes,
    links, menu paths or app labels ('Lock my account', 'Help > My Cases')."""
    plain = _LABELS.sub(" ", _LINKS.sub(" ", _QUOTED.sub(" ", sentence)))
    words = _WORD.findall(plain)
    return len(_FIRST_PERSON.findall(plain)) / max(len(words), 1)


@dataclass(frozen=True)
class PassageModel:
    """score = features . weights; a sentence scoring >= threshold does not belong."""

    weights: np.ndarray
    threshold: float
    about: dict[str, Any]

    def score(self, features: np.ndarray) -> np.ndarray:
        return np.asarray(features @ self.weights)

    def save(self, path: Path) -> Path:
        np.savez_compressed(
            path,
            weights=self.weights.astype(np.float64),
            scalars=np.array([self.threshold]),
            features=np.array(FEATURES),
            about=np.array(json.dumps(self.about, sort_keys=True)),
        )
        return path

    @classmethod
    def load(cls, path: Path = PASSAGE_MODEL) -> PassageModel:
        with np.load(path) as data:
            if tuple(str(f) for f in data["features"]) != FEATURES:
                raise ValueError(f"{path}: fitted on other features; run scripts/fit_guards.py")
            return cls(data["weights"], float(data["scalars"][0]), json.loads(str(data["about"])))


@dataclass(frozen=True)
class ForeignSentence:
    """The highest-scoring sentence of an entry that crossed the threshold. Its rule is
    passage.foreign_errand when the novelty term carried it over (an errand naming what the
    KB never mentions), else passage.foreign_sentence."""

    sentence: str
    score: float
    threshold: float
    features: dict[str, float]
    rule: str = "passage.foreign_sentence"
    novel: tuple[str, ...] = ()  # an errand's words the KB uses nowhere else

    def why(self) -> str:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in self.features.items())
        unknown = f"; words the KB never uses: {', '.join(self.novel[:8])}" if self.novel else ""
        return (
            f"sentence {self.sentence[:160]!r} does not belong: score {self.score:.2f} >= "
            f"{self.threshold:.2f} ({parts}{unknown})"
        )


class ForeignSentences:
    """Holds the exemplar vectors (shipped: core/shipped_vectors); `scan` embeds every sentence
    and title it is given in one batch (ingest only: ~1 ms a sentence on 2 cores)."""

    def __init__(
        self,
        embedder: Embedder,
        model: PassageModel | None = None,
        injection: LearnedInjection | None = None,
    ) -> None:
        self.embedder = remembering(embedder)  # `_scan` keeps sentences repeated across batches
        self.model = model or PassageModel.load()
        self.injection = injection or LearnedInjection(
            embedder, LinearModel.load(PASSAGE_INJECTION)
        )
        exemplars = [*FOREIGN, *(t for _, texts in ATTACKS.values() for t in texts)]
        self._exemplar_texts = exemplars
        self._exemplars = shipped(embedder, exemplars)

    def features(
        self,
        entries: Sequence[tuple[str, str]],
        topic: Sequence[str] = (),
        skip_exemplar: bool = False,
        topic_vectors: np.ndarray | None = None,
        words: KBVocabulary | None = None,
    ) -> list[tuple[list[str], np.ndarray]]:
        """Per entry: its sentences and their feature rows (len(FEATURES) columns).

        `entries` are (title, text); `topic` adds titles of the KB's other entries to the
        KB-topic feature (`topic_vectors`: their embeddings, when `topic` already holds every
        entry's title, so a KB scanned in batches embeds its titles once). `words`: the whole
        KB's vocabulary for the novelty feature (default: that of `entries`). `skip_exemplar`
        leaves a sentence's own exemplar out of its instruction feature (for fitting on the
        exemplars themselves)."""
        if words is None:
            words = vocabulary(entries)
        # Each sentence is a candidate, and so is each piece of a sentence that looks like two
        # run together; `parent` ties a piece to its sentence (context ignores its own).
        split: list[list[tuple[int, str]]] = []
        for _, text in entries:
            split.append(pieces(text))
        flat = [text for scored in split for _, text in scored]
        if not flat:
            return [([], np.zeros((0, len(FEATURES)))) for _ in split]
        if topic_vectors is None:
            all_titles = list(dict.fromkeys([*(title for title, _ in entries), *topic]))
            vectors = np.asarray(self.embedder.embed(flat + all_titles), dtype=np.float32)
            sentence_vectors, title_vectors = vectors[: len(flat)], vectors[len(flat) :]
        else:
            all_titles = list(topic)
            sentence_vectors = np.asarray(self.embedder.embed(flat), dtype=np.float32)
            title_vectors = topic_vectors
        title_index = {t: i for i, t in enumerate(all_titles)}
        instruction = sentence_vectors @ self._exemplars.T
        if skip_exemplar:
            where = {t: i for i, t in enumerate(self._exemplar_texts)}
            for row, text in enumerate(flat):
                if text in where:
                    instruction[row, where[text]] = -1.0
        best_instruction = instruction.max(axis=1)
        kb = (sentence_vectors @ title_vectors.T).max(axis=1)
        model = self.injection.model
        out: list[tuple[list[str], np.ndarray]] = []
        start = 0
        for (title, entry_text), scored in zip(entries, split, strict=True):
            rows = np.zeros((len(scored), len(FEATURES)))
            own_words = words.own(title, units(entry_text))
            if scored:
                block = sentence_vectors[start : start + len(scored)]
                own = block @ title_vectors[title_index[title]]
                parents = np.array([k for k, _ in scored])
                pairwise = block @ block.T
                pairwise[parents[:, None] == parents[None, :]] = -1.0
                context = pairwise.max(axis=1)
                for i, (_, text) in enumerate(scored):
                    rows[i] = (
                        model.probability(block[i], text),
                        best_instruction[start + i],
                        max(own[i], context[i]),
                        kb[start + i],
                        first_person(text),
                        request(text),
                        words.novelty(text, own_words).value,
                    )
            out.append(([text for _, text in scored], rows))
            start += len(scored)
        return out

    def scan(
        self,
        entries: Sequence[tuple[str, str]],
        topic: Sequence[str] = (),
        words: KBVocabulary | None = None,
    ) -> list[ForeignSentence | None]:
        """For each entry of more than one sentence, its most foreign sentence when it crosses
        the threshold. Entries are embedded SCAN_BATCH at a time (memory holds one batch of
        sentence vectors), the KB's titles once. `words`: the whole KB's vocabulary (default:
        that of `entries` and `topic`)."""
        if not entries:
            return []
        if words is None:
            words = vocabulary([*entries, *((title, "") for title in topic)])
        several = [i for i, (_, text) in enumerate(entries) if not says_one_thing(text)]
        found: list[ForeignSentence | None] = [None] * len(entries)
        hits = self._scan([entries[i] for i in several], topic, words)
        for i, hit in zip(several, hits, strict=True):
            found[i] = hit
        return found

    def _scan(
        self, entries: Sequence[tuple[str, str]], topic: Sequence[str], words: KBVocabulary
    ) -> list[ForeignSentence | None]:
        if not entries:
            return []
        titles = list(dict.fromkeys([*(title for title, _ in entries), *topic]))
        title_vectors = np.asarray(self.embedder.embed(titles), dtype=np.float32)
        batches = [
            entries[start : start + SCAN_BATCH] for start in range(0, len(entries), SCAN_BATCH)
        ]
        # A sentence met in more than one batch (a document's boilerplate under many headings)
        # is embedded once: its vector is kept until the last batch.
        met = Counter(p for batch in batches for p in {p for _, t in batch for _, p in pieces(t)})
        with self.embedder.session(wanted=[p for p, n in met.items() if n > 1]):
            features = [
                item
                for batch in batches
                for item in self.features(batch, titles, topic_vectors=title_vectors, words=words)
            ]
        return [
            self._judge(sentences, rows, words, words.own(title, units(text)))
            for (title, text), (sentences, rows) in zip(entries, features, strict=True)
        ]

    def _judge(
        self, sentences: list[str], rows: np.ndarray, words: KBVocabulary, own: set[str]
    ) -> ForeignSentence | None:
        """The entry's highest-scoring sentence when it crosses the threshold (`own`: the
        entry's words, for the novel ones shown to the operator)."""
        if not sentences:
            return None
        scores = self.model.score(rows)
        best = int(np.argmax(scores))
        if scores[best] < self.model.threshold:
            return None
        novelty = float(self.model.weights[NOVELTY] * rows[best][NOVELTY])
        errand = novelty > 0 and scores[best] - novelty < self.model.threshold
        return ForeignSentence(
            sentence=sentences[best],
            score=round(float(scores[best]), 4),
            threshold=self.model.threshold,
            features={k: round(float(v), 3) for k, v in zip(FEATURES, rows[best], strict=True)},
            rule="passage.foreign_errand" if errand else "passage.foreign_sentence",
            novel=words.novelty(sentences[best], own).words if rows[best][NOVELTY] else (),
        )


_detectors: list[tuple[Embedder, ForeignSentences]] = []
_lock = threading.Lock()


def foreign_detector(embedder: Embedder) -> ForeignSentences:
    """One detector per embedder per process (its exemplar vectors are embedded once)."""
    with _lock:
        for known, detector in _detectors:
            if known is embedder:
                return detector
        detector = ForeignSentences(embedder)
        _detectors.append((embedder, detector))
        del _detectors[:-4]
        return detector
