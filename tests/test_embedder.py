"""The MiniLM embedder: batching by token length never changes a text's vector."""

from __future__ import annotations

import numpy as np
import pytest

from guardrag.core.embedder import (
    MAX_TOKENS,
    OnnxEmbedder,
    Remembering,
    head_words,
    length_batches,
    remembering,
)
from tests.fakes import Recording

TEXTS = [
    "How do I top up?",
    "Tap Top Up, choose FPX or a debit card, enter the amount and confirm with your PIN. "
    "The money shows in your balance within a minute; FPX top ups are free of charge.",
    "What is the daily limit?",
    "RM 5,000 a day for verified accounts.",
]


def test_length_batches_group_similar_lengths_within_the_token_budget() -> None:
    lengths = [5, 100, 6, 300, 7, 90]
    batches = length_batches(lengths, max_tokens=200, max_rows=2)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert batches == [[0, 2], [4, 5], [1], [3]]  # 300 tokens exceed the budget: alone
    for batch in batches[:-1]:
        assert len(batch) * max(lengths[i] for i in batch) <= 200


def test_head_words_keeps_the_model_window() -> None:
    assert head_words("a b c", limit=5) == "a b c"
    assert head_words("a  b\nc d", limit=2) == "a b"


def test_vectors_do_not_depend_on_batch_company_or_order(embedder: OnnxEmbedder) -> None:
    together = embedder.embed(TEXTS)
    alone = np.vstack([embedder.embed([text]) for text in TEXTS])
    assert together.shape == (len(TEXTS), embedder.dim) and together.dtype == np.float32
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(embedder.embed(TEXTS[::-1]), together[::-1], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_repeated_texts_get_their_vector_at_every_position(embedder: OnnxEmbedder) -> None:
    rows = embedder.embed([TEXTS[0], TEXTS[1], TEXTS[0]])
    np.testing.assert_array_equal(rows[0], rows[2])
    assert float(rows[0] @ rows[1]) < 0.99
    assert embedder.embed([]).shape == (0, embedder.dim)


def test_serial_and_parallel_batches_agree(embedder: OnnxEmbedder) -> None:
    many = [f"{text} ({n})" for n in range(12) for text in TEXTS]  # several length batches
    np.testing.assert_allclose(OnnxEmbedder(threads=1).embed(many), embedder.embed(many), atol=1e-5)


def test_long_text_is_cut_to_the_window_without_changing_its_vector(
    embedder: OnnxEmbedder,
) -> None:
    long = " ".join(f"word{n % 50}" for n in range(3 * MAX_TOKENS))
    tokenizer = embedder._tokenizer
    assert embedder._token_ids([long]) == [tokenizer.encode(long).ids]
    assert len(embedder._token_ids([long])[0]) == MAX_TOKENS


def test_words_that_tokenise_to_nothing_do_not_hide_the_text(embedder: OnnxEmbedder) -> None:
    hidden = "\u200b " * (2 * MAX_TOKENS) + "how do I top up"  # zero-width spaces: no tokens
    np.testing.assert_allclose(
        embedder.embed([hidden]), embedder.embed(["how do I top up"]), atol=1e-6
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_setting_is_respected(threads: int) -> None:
    embedder = OnnxEmbedder(threads=threads)
    assert (embedder._pool is None) == (threads == 1)


def test_remembering_embeds_a_wanted_text_once_with_the_same_vector(
    embedder: OnnxEmbedder,
) -> None:
    recording = Recording(embedder)
    memo = remembering(recording)
    assert remembering(recording) is memo and remembering(memo) is memo
    known = embedder.embed([TEXTS[3]])[0]
    with memo.session(wanted=TEXTS[:2], known=[(TEXTS[3], known.tolist())]):
        first = memo.embed(TEXTS)
        again = memo.embed([TEXTS[1], TEXTS[0], TEXTS[2], TEXTS[3]])
    np.testing.assert_allclose(first, embedder.embed(TEXTS), atol=1e-5)
    np.testing.assert_array_equal(again[:2], first[[1, 0]])
    # the known text never reached the model; the unwanted one was embedded every time
    assert recording.texts == [*TEXTS[:3], TEXTS[2]]
    assert memo.reused == 1 + 3
    memo.embed(TEXTS[:1])  # the session closed: nothing is kept any more
    assert recording.texts[-1] == TEXTS[0]


def test_remembering_keeps_at_most_its_limit(embedder: OnnxEmbedder) -> None:
    recording = Recording(embedder)
    memo = Remembering(recording, limit=2)
    with memo.session(wanted=TEXTS):
        memo.embed(TEXTS)
        memo.embed(TEXTS)
    assert recording.texts == TEXTS + TEXTS[2:]  # two kept, the others embedded again


def test_remembering_wraps_an_embedder_without_weak_references(embedder: OnnxEmbedder) -> None:
    class Slotted:
        __slots__ = ("dim", "inner")

        def __init__(self, inner: OnnxEmbedder) -> None:
            self.inner, self.dim = inner, inner.dim

        def embed(self, texts: list[str]) -> np.ndarray:
            return self.inner.embed(texts)

    slotted = Slotted(embedder)
    with remembering(slotted).session(wanted=TEXTS[:1]) as memo:
        np.testing.assert_allclose(memo.embed(TEXTS[:1]), embedder.embed(TEXTS[:1]), atol=1e-5)
