"""The shipped exemplar vectors: used only for the model that wrote them, texts they lack embedded."""

from __future__ import annotations

import numpy as np

from guardrag.config.exemplars.domain import GREETINGS
from guardrag.core import shipped_vectors
from guardrag.core.embedder import Embedder
from tests.fakes import Recording


class Shifted:
    """Another model: the real vectors, rotated."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.dim = inner, inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.roll(self.inner.embed(texts), 1, axis=1)


def test_the_real_model_reads_the_file_and_embeds_only_new_texts(embedder: Embedder) -> None:
    recording = Recording(embedder)
    texts = [*GREETINGS[:3], "A sentence no exemplar file holds."]
    vectors = shipped_vectors.shipped(recording, texts)
    fresh = embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (4, embedder.dim)
    assert np.all(np.sum(vectors * fresh, axis=1) > 0.999)
    probe = shipped_vectors.exemplar_texts()[0]
    assert set(recording.texts) <= {probe, texts[-1]}  # the greetings came from the file


def test_another_model_never_gets_the_shipped_vectors(embedder: Embedder) -> None:
    other = Recording(Shifted(embedder))
    vectors = shipped_vectors.shipped(other, GREETINGS[:3])
    assert other.texts[-3:] == list(GREETINGS[:3])
    assert np.allclose(vectors, np.roll(embedder.embed(list(GREETINGS[:3])), 1, axis=1), atol=1e-5)


def test_a_missing_file_means_embedding_everything(embedder: Embedder, tmp_path) -> None:
    recording = Recording(embedder)
    vectors = shipped_vectors.shipped(recording, GREETINGS[:2], path=tmp_path / "none.npz")
    assert recording.texts == list(GREETINGS[:2]) and vectors.shape == (2, embedder.dim)
