"""Learned detectors: logistic regressions over MiniLM vectors and a few cheap text features,
fit offline (`scripts/fit_guards.py`) and shipped as weights next to this module.

`injection_model.npz` scores a customer message (the input guard): the question's vector plus
its word uni- and bigrams, fit on the train split of deepset/prompt-injections and our own
data (red-team attacks vs. our FAQ, golden and red-team benign questions, greetings and
off-topic requests, which belong to the domain gate, not to this guard). Its positive label
is an attempt on the assistant itself (override or reveal its instructions, change its role
or rules, smuggle instructions for a model); benign requests the bot does not serve (write,
summarise, role-play for a story, public instruction-following data) and role-framed real
questions are negatives: they are out of domain or answerable, never attacks. Its threshold
is the lowest that kept the out-of-fold false positives of the fit under 1% (English
off-topic questions and benign requests) and 0.5% (customer questions). The held-out test
split is only ever reported.

A message longer than one sentence is also scored sentence by sentence, so an instruction
buried in a long benign paragraph is not averaged away. Scoring n sentences and keeping the
highest is n tests: the longer the message, the likelier one benign sentence crosses the
threshold by chance. So a sentence's log-odds are lowered by `sentence_tail * ln(n)` before
they are compared (`corrected`): with benign sentences' log-odds falling off exponentially
above the threshold at that scale (fitted, `scripts/fit_sentence_tail.py`), a message of n
sentences then has the false-alarm chance of one sentence, whatever n (Bonferroni).

`injection_reader.npz` is its second reader: the same kind of model over all-mpnet-base-v2 vectors
(installed by `make llm`, shared with rerank's second opinion), fit on the same examples and folds.
A message MiniLM scores at or above the reader's band (fitted too) is decided by MPNet; below the
band it passes. Out of fold, English recall at the same caps goes from 0.79 (MiniLM alone) to 0.88;
none of our 2,558 benign test questions reaches the band, so the guard's median cost does not move
(a message in the band pays ~75 ms). Without MPNet, MiniLM decides alone at its own threshold.

Inference is a dot product and a dictionary lookup per word (~0.05 ms with the caller's
vector); a long message costs one batched embedding of its sentences.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from guardrag.config.settings import Settings
from guardrag.contract import RefusalReason
from guardrag.core.embedder import Embedder, Encoder
from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.mpnet import installed_mpnet

INJECTION_MODEL = Path(__file__).with_name("injection_model.npz")
INJECTION_READER = Path(__file__).with_name("injection_reader.npz")
log = logging.getLogger("guardrag")

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|\\n")
#: Sentences shorter than this carry too little to be scored alone.
MIN_SENTENCE_WORDS = 3
MAX_SENTENCES = 12
_EXCERPT = 80
# A one-sentence question asking what the customer should do ("Should I ignore the
# instructions in this SMS?", "boleh saya abaikan arahan dalam SMS ini?") asks for advice about
# instructions someone else gave; the rules still judge it, the classifier does not: its words
# are an attack's words, its speaker is not.
_ASKS_FOR_ADVICE = re.compile(
    r"^\s*(?:should|shall|can|could|may|must|do|would)\s+(?:i|we)\b[^.!?\n]*\?\s*$|"
    r"^\s*(?:boleh(?:kah)?|patut(?:kah)?|perlu(?:kah)?)\s+(?:saya|kami)\b[^.!?\n]*\?\s*$",
    re.IGNORECASE,
)


def corrected(probability: float, tail: float, count: int) -> float:
    """A sentence's probability as evidence about a message of which `count` sentences were
    scored: its log-odds lowered by `tail * ln(count)`. If benign sentences' log-odds above a
    cut-off c fall off as exp(-x / tail), the chance that the highest of `count` reaches
    c + tail * ln(count) is about `count` times exp(-ln(count)) the chance that one reaches
    c: the same for every length. `tail` 0 (or one sentence) leaves it unchanged."""
    if count < 2 or tail <= 0:
        return probability
    p = min(max(probability, 1e-12), 1 - 1e-12)
    logit = math.log(p / (1 - p)) - tail * math.log(count)
    return 1.0 / (1.0 + math.exp(-max(min(logit, 50.0), -50.0)))


def ngrams(text: str) -> set[str]:
    """Lower-cased words and word bigrams (the sparse features)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).lower())
    return {*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))}


def sentences(text: str) -> list[str]:
    """The sentences of a text worth scoring alone; [] when it is a single sentence."""
    parts = [p.strip() for p in _SENTENCE.split(text)]
    parts = [p for p in parts if len(p.split()) >= MIN_SENTENCE_WORDS]
    return parts[:MAX_SENTENCES] if len(parts) > 1 else []


@dataclass(frozen=True)
class LinearModel:
    """sigmoid(dense . vector + ngram_weight * mean-normalised sum of word weights + bias)."""

    dense: np.ndarray
    vocab: dict[str, int]
    sparse: np.ndarray
    bias: float
    ngram_weight: float
    threshold: float
    about: dict[str, Any]

    def probability(self, vector: np.ndarray, text: str) -> float:
        logit = float(self.dense @ vector) + self.bias
        hits = [self.vocab[g] for g in ngrams(text) if g in self.vocab]
        if hits:
            logit += self.ngram_weight * float(self.sparse[hits].sum()) / math.sqrt(len(hits))
        return 1.0 / (1.0 + math.exp(-max(min(logit, 50.0), -50.0)))

    @property
    def sentence_tail(self) -> float:
        """The scale of benign sentences' log-odds tail (`corrected`); 0 when not fitted."""
        return float(self.about.get("sentence_tail", 0.0))

    def strongest(self, scored: list[tuple[float, str]]) -> tuple[float, str, float]:
        """(deciding probability, text, its own probability) over a message's score (first)
        and its sentences' (the rest), each sentence's corrected for how many were scored."""
        count = len(scored) - 1
        return max(
            (
                (corrected(p, self.sentence_tail, count) if i else p, t, p)
                for i, (p, t) in enumerate(scored)
            ),
            key=lambda s: s[0],
        )

    def save(self, path: Path) -> Path:
        words = sorted(self.vocab, key=self.vocab.__getitem__)
        np.savez_compressed(
            path,
            dense=self.dense.astype(np.float32),
            sparse=self.sparse.astype(np.float32),
            words=np.array(words),
            scalars=np.array([self.bias, self.ngram_weight, self.threshold]),
            about=np.array(json.dumps(self.about, sort_keys=True)),
        )
        return path

    @classmethod
    def load(cls, path: Path) -> LinearModel:
        with np.load(path) as data:
            bias, ngram_weight, threshold = (float(x) for x in data["scalars"])
            return cls(
                dense=data["dense"].astype(np.float32),
                vocab={str(w): i for i, w in enumerate(data["words"])},
                sparse=data["sparse"].astype(np.float32),
                bias=bias,
                ngram_weight=ngram_weight,
                threshold=threshold,
                about=json.loads(str(data["about"])),
            )


# --- fitting (offline, scripts/fit_guards.py) ---------------------------------------------


def build_vocab(texts: list[str], min_df: int) -> dict[str, int]:
    """Words and bigrams found in at least `min_df` texts."""
    counts: dict[str, int] = {}
    for text in texts:
        for gram in ngrams(text):
            counts[gram] = counts.get(gram, 0) + 1
    return {g: i for i, g in enumerate(sorted(g for g, n in counts.items() if n >= min_df))}


def design(
    vectors: np.ndarray, texts: list[str], vocab: dict[str, int], weight: float
) -> np.ndarray:
    """[vector | weight * n-gram indicators / sqrt(count)] rows, as `LinearModel` scores them."""
    sparse = np.zeros((len(texts), len(vocab)), dtype=np.float32)
    for row, text in enumerate(texts):
        hits = [vocab[g] for g in ngrams(text) if g in vocab]
        if hits:
            sparse[row, hits] = weight / math.sqrt(len(hits))
    return np.hstack([vectors.astype(np.float32), sparse])


#: Above this many weights the Newton step is solved by conjugate gradients on
#: hessian-vector products instead of forming the (cols x cols) hessian.
DENSE_NEWTON_MAX = 4096


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, iters: int = 50) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method; the last weight is the bias
    (not regularised). A wide design (many n-grams) solves each step matrix-free, its
    n-gram columns (mostly zeros) kept as their non-zero entries."""
    rows, cols = x.shape
    xb = np.hstack([x, np.ones((rows, 1), dtype=x.dtype)]).astype(np.float64)
    wide = _Split(xb) if cols + 1 > DENSE_NEWTON_MAX else None
    beta = np.zeros(cols + 1)
    ridge = np.full(cols + 1, l2)
    ridge[-1] = 0.0
    for _ in range(iters):
        z = wide.dot(beta) if wide else xb @ beta
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
        gradient = (wide.tdot(p - y) if wide else xb.T @ (p - y)) + ridge * beta
        curve = p * (1 - p)
        if wide is None:
            hessian = (xb * curve[:, None]).T @ xb + np.diag(ridge)
            step = np.linalg.solve(hessian, gradient)
        else:
            step = _newton_step_cg(wide, curve, ridge, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-7:
            break
    return beta


class _Split:
    """A design matrix as its dense columns (vector, bias) and the non-zero entries of the
    rest: products with it cost what its non-zeros cost."""

    def __init__(self, xb: np.ndarray) -> None:
        self.shape = xb.shape
        sparse = np.count_nonzero(xb, axis=0) <= 0.05 * len(xb)
        self.dense_cols = np.flatnonzero(~sparse)
        self.dense = np.ascontiguousarray(xb[:, self.dense_cols])
        self.rows, cols = np.nonzero(xb[:, sparse])
        self.cols = np.flatnonzero(sparse)[cols]
        self.vals = xb[self.rows, self.cols]

    def dot(self, v: np.ndarray) -> np.ndarray:
        """xb @ v"""
        out = self.dense @ v[self.dense_cols]
        return out + np.bincount(self.rows, self.vals * v[self.cols], self.shape[0])

    def tdot(self, u: np.ndarray, squared: bool = False) -> np.ndarray:
        """xb.T @ u, or (xb * xb).T @ u"""
        dense, vals = (self.dense**2, self.vals**2) if squared else (self.dense, self.vals)
        out = np.bincount(self.cols, vals * u[self.rows], self.shape[1])
        out[self.dense_cols] += dense.T @ u
        return out


def _newton_step_cg(
    xb: _Split, curve: np.ndarray, ridge: np.ndarray, gradient: np.ndarray
) -> np.ndarray:
    """Solve (xb' diag(curve) xb + diag(ridge)) step = gradient by Jacobi-preconditioned
    conjugate gradients (each iteration two matrix-vector products)."""
    diag = xb.tdot(curve, squared=True) + ridge + 1e-12
    step = np.zeros_like(gradient)
    residual = gradient.copy()
    z = residual / diag
    direction = z.copy()
    rz = float(residual @ z)
    bar = 1e-10 * float(np.linalg.norm(gradient)) + 1e-14
    for _ in range(10 * len(gradient)):
        hd = xb.tdot(curve * xb.dot(direction)) + ridge * direction
        alpha = rz / float(direction @ hd)
        step += alpha * direction
        residual -= alpha * hd
        if float(np.linalg.norm(residual)) < bar:
            break
        z = residual / diag
        rz, previous = float(residual @ z), rz
        direction = z + (rz / previous) * direction
    return step


def model_from_weights(
    beta: np.ndarray, vocab: dict[str, int], weight: float, threshold: float, about: dict[str, Any]
) -> LinearModel:
    dim = len(beta) - 1 - len(vocab)
    return LinearModel(
        dense=beta[:dim].astype(np.float32),
        vocab=vocab,
        sparse=beta[dim:-1].astype(np.float32),
        bias=float(beta[-1]),
        ngram_weight=weight,
        threshold=threshold,
        about=about,
    )


# --- the input guard's detector ----------------------------------------------------------


@dataclass(frozen=True)
class SecondReader:
    """all-mpnet-base-v2 and a classifier over its vectors (`injection_reader.npz`): asked
    about a message the MiniLM classifier scores at or above `band`, and then it decides.
    MPNet reads injections better (out-of-fold English recall 0.79 -> 0.88 at the same
    false-positive caps) but costs ~75 ms a message, so it reads only what MiniLM doubts."""

    encoder: Encoder
    model: LinearModel

    @property
    def band(self) -> float:
        return float(self.model.about["band"])

    def best(self, texts: list[str]) -> tuple[float, str, float]:
        """`LinearModel.strongest` over a message and its sentences (`texts`), embedded in
        one batch."""
        vectors = self.encoder.embed(texts)
        scored = [(self.model.probability(v, t), t) for v, t in zip(vectors, texts, strict=True)]
        return self.model.strongest(scored)


@lru_cache(maxsize=4)
def reader_for(encoder: Encoder) -> SecondReader:
    """One reader per encoder (the shipped weights are read once)."""
    return SecondReader(encoder, LinearModel.load(INJECTION_READER))


def installed_reader(settings: Settings | None = None) -> SecondReader | None:
    """The second reader over the installed MPNet (the model dir of `settings`, else of the
    environment's), or None when it is not installed: MiniLM then decides alone."""
    encoder, problem = installed_mpnet(settings or Settings())
    if encoder is None:
        log.info("the injection classifier reads with MiniLM alone: %s", problem)
        return None
    return reader_for(encoder)


class LearnedInjection:
    """PROMPT_INJECTION when the message, or one of its sentences (corrected for how many
    were scored), scores at or above the fitted threshold. With a second reader, a message MiniLM
    scores at or above the reader's band is decided by the reader instead (one MPNet batch of the
    message and its sentences); below the band it passes. A reader that fails leaves the decision
    to MiniLM's threshold."""

    def __init__(
        self,
        embedder: Embedder,
        model: LinearModel | None = None,
        reader: SecondReader | None = None,
    ) -> None:
        self.embedder = embedder
        self.model = model or LinearModel.load(INJECTION_MODEL)
        self.reader = reader

    def scores(self, text: str, vector: np.ndarray) -> list[tuple[float, str]]:
        """(probability, text scored) for the whole text, then each of its sentences."""
        out = [(self.model.probability(vector, text), text)]
        parts = sentences(text)
        if parts:
            vectors = self.embedder.embed(parts)
            out += [(self.model.probability(v, p), p) for v, p in zip(vectors, parts, strict=True)]
        return out

    def detect(self, norm: Normalized, vector: np.ndarray | None = None) -> GuardFinding | None:
        """`vector` is the caller's embedding of `norm.original`, used when normalisation
        changed nothing (as in the semantic detector). The classifier reads the text with
        misspelt override words respelt ("igmre what I said before")."""
        text = norm.respelled or norm.text
        respelt = "misspelt override words respelt; " if text != norm.text else ""
        if vector is None or text != norm.original:
            vector = np.asarray(self.embedder.embed([text])[0], dtype=np.float32)
        if _ASKS_FOR_ADVICE.match(text):
            return None
        scores = self.scores(text, vector)
        if self.reader is not None:
            # the band reads MiniLM's highest score as it is: it decides who reads, not what
            top = max(s for s, _ in scores)
            if top < self.reader.band:
                return None
            try:
                second = self.reader.best([text, *sentences(text)])
            except Exception as exc:  # a model that will not load or run: MiniLM decides
                log.warning("injection second reader unavailable, MiniLM decides: %s", exc)
            else:
                threshold = self.reader.model.threshold
                why = f"{respelt}MiniLM {top:.2f} >= band {self.reader.band:.2f}, so MPNet read it"
                return _finding(second, threshold, why, text, len(scores) - 1)
        best = self.model.strongest(scores)
        return _finding(best, self.model.threshold, respelt.rstrip("; "), text, len(scores) - 1)


def _finding(
    best: tuple[float, str, float], threshold: float, why: str, text: str, count: int
) -> GuardFinding | None:
    """PROMPT_INJECTION when the deciding score (`LinearModel.strongest`) reaches
    `threshold`; `why` leads the detail, `count` sentences were scored."""
    score, scored, own = best
    if score < threshold:
        return None
    where = (
        "the message"
        if scored == text
        else f"the sentence {scored[:_EXCERPT]!r} ({own:.2f} alone, one of {count})"
    )
    return GuardFinding(
        reason=RefusalReason.PROMPT_INJECTION,
        rule="learned.injection",
        score=round(score, 4),
        threshold=round(threshold, 4),
        detail=f"injection classifier {why + ': ' if why else ''}{score:.2f} >= {threshold:.2f} "
        f"on {where}",
    )
