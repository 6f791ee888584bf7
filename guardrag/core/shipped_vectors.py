"""Vectors of the package's exemplar texts, shipped with it: embedding the ~500 exemplar
sentences of the guards, the domain gate and the ingest screen costs a process seconds of CPU
on 2 cores; loading them costs ~1 ms.

    vectors = shipped(embedder, texts)  # float32 rows in the order of `texts`

A text the file does not hold is embedded on the spot, so an edited exemplar costs only itself
until `scripts/score_guards.py --rebuild-vectors` writes the file again (tests/test_guards.py
fails while it is stale). The file is used for an embedder only if that embedder gives the
file's first text the same vector (cosine >= PROBE_MIN_COSINE): another model never gets them.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from guardrag.config.exemplars.attacks import ATTACKS, BENIGN, FOREIGN
from guardrag.config.exemplars.domain import GREETINGS, OFF_TOPIC
from guardrag.core.embedder import Embedder

SHIPPED = Path(__file__).with_name("exemplar_vectors.npz")
#: float16 storage moves a cosine by < 1e-3; a different model moves it far more.
PROBE_MIN_COSINE = 0.999

_trusted: weakref.WeakKeyDictionary[Embedder, bool] = weakref.WeakKeyDictionary()


def exemplar_texts() -> list[str]:
    """Every exemplar text of the package, once each, in a stable order."""
    attacks = [text for _, examples in ATTACKS.values() for text in examples]
    return list(dict.fromkeys([*attacks, *BENIGN, *FOREIGN, *OFF_TOPIC, *GREETINGS]))


def shipped(embedder: Embedder, texts: Sequence[str], path: Path = SHIPPED) -> np.ndarray:
    """The vectors of `texts`: from the shipped file where it holds them for this embedder,
    embedded otherwise."""
    table = _table(path)
    if not texts or not table or not _matches(embedder, table):
        return np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    missing = [text for text in dict.fromkeys(texts) if text not in table]
    fresh = dict(zip(missing, embedder.embed(missing), strict=True)) if missing else {}
    rows = [table[text] if text in table else fresh[text] for text in texts]
    return np.asarray(rows, dtype=np.float32)


def write(embedder: Embedder, path: Path = SHIPPED) -> Path:
    """Embed every exemplar text and store the vectors (float16 halves the file)."""
    texts = exemplar_texts()
    np.savez_compressed(
        path, texts=np.array(texts), vectors=embedder.embed(texts).astype(np.float16)
    )
    _table.cache_clear()
    return path


@functools.cache
def _table(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        return {}
    with np.load(path) as data:
        texts = [str(text) for text in data["texts"]]
        vectors = data["vectors"].astype(np.float32)
    return dict(zip(texts, vectors, strict=True))


def _matches(embedder: Embedder, table: dict[str, np.ndarray]) -> bool:
    """Whether `embedder` is the model the file was written with (one probe per embedder)."""
    try:
        return _trusted[embedder]
    except (KeyError, TypeError):
        pass
    first, vector = next(iter(table.items()))
    probe = np.asarray(embedder.embed([first])[0], dtype=np.float32)
    cosine = float(probe @ vector) / max(float(np.linalg.norm(vector)), 1e-12)
    same = cosine >= PROBE_MIN_COSINE
    with contextlib.suppress(TypeError):  # one that cannot be weakly referenced: probed each time
        _trusted[embedder] = same
    return same
