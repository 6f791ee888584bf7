"""BM25 sparse vectors, computed in-process by Qdrant Edge's tokenizer (offline, no model files).

Documents get saturated term frequencies, queries weight 1 per distinct term; the IDF part of
BM25 is applied by Qdrant at query time (IDF modifier on the "bm25" sparse vector), so a document
vector never has to change when the rest of the corpus does.
"""

from __future__ import annotations

import threading

import qdrant_edge as qe

from guardrag.core.store.base import SparseVector

# FAQ question + answer and ~120-word chunks keep some 20-70 terms after stop words; the engine's
# default (256) suits long documents and would all but switch length normalisation off.
AVG_DOC_TERMS = 50.0

_model: qe.Bm25 | None = None
_model_lock = threading.Lock()


def _encoder() -> qe.Bm25:
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                # English stemming and stop words; accents folded so "resume" matches "résumé".
                config = qe.Bm25Config(
                    avg_len=AVG_DOC_TERMS, language="english", ascii_folding=True
                )
                _model = qe.Bm25(config)
    return _model


def _convert(vector: qe.SparseVector) -> SparseVector:
    return SparseVector(indices=list(vector.indices), values=list(vector.values))


def encode_documents(texts: list[str]) -> list[SparseVector]:
    """Sparse vectors to store with each point (named sparse vector "bm25")."""
    model = _encoder()
    return [_convert(model.embed_document(text)) for text in texts]


def encode_query(text: str) -> SparseVector:
    """The query's sparse vector; empty when every word is a stop word (terms are hashed, so
    no word is "unknown")."""
    return _convert(_encoder().embed_query(text))
