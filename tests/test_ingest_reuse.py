"""Ingest embeds each FAQ question once, although the screen, the points and calibration all
need its vector; a re-ingest takes the questions' vectors from the KB (real model, real Edge)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.store.edge import EdgeStore
from tests.conftest import SAMPLE_FAQ
from tests.fakes import Recording


def test_questions_are_embedded_once_and_their_vectors_are_unchanged(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    rows = [json.loads(line) for line in SAMPLE_FAQ.read_text().splitlines()[:24]]
    source = tmp_path / "faq.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = [r["question"] for r in rows]
    recording = Recording(embedder)
    store = EdgeStore(tmp_path / "data")
    try:
        report = ingest(store, recording, "kb", [source])
        assert report.total == len(rows) and report.calibration is not None
        counts = Counter(recording.texts)
        assert all(counts[q] == 1 for q in questions)  # the screen's embedding, used thrice
        stored = {p.payload["question"]: p for p in store.points("kb")}
        fresh = embedder.embed(questions)
        for question, vector in zip(questions, fresh, strict=True):
            np.testing.assert_allclose(stored[question].dense, vector, atol=1e-5)
        answers = embedder.embed([r["answer"] for r in rows])
        for row, vector in zip(rows, answers, strict=True):
            content = stored[row["question"]].content
            assert content is not None
            np.testing.assert_allclose(content, vector, atol=1e-5)

        # One answer edited: its question's vector comes from the KB, not the model.
        rows[0] = {**rows[0], "answer": rows[0]["answer"] + " Fees may apply."}
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
        recording.texts.clear()
        again = ingest(store, recording, "kb", [source])
        assert (again.updated, again.unchanged) == (1, len(rows) - 1)
        assert not set(questions) & set(recording.texts)
        edited = next(p for p in store.points("kb") if p.payload["source_id"] == rows[0]["id"])
        np.testing.assert_allclose(edited.dense, fresh[0], atol=1e-5)
    finally:
        store.close()
