"""The pieces of two measuring scripts whose numbers docs/DECISION.md reports ("Three more readers
that do not pay"): the tie-break replay of the verbatim rule and the query map's gradient, so a
re-run measures what the report says it does."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from guardrag.core.embedder import OnnxEmbedder
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
from measure_query_adapter import Asked, fit, gradient, recall_at_1
from measure_tie_breaks import Decided, Entries, answered, entries

CLOSE_ACCOUNT = "kw-closure-001"  # "How do I close my Kinetic Wallet account?"
WHY_NOT = "kw-closure-002"  # "Why can't I close my account?"
KNOWN = Entries(
    {CLOSE_ACCOUNT: "How do I close my Kinetic Wallet account?", WHY_NOT: "Why can't I close my account?"},
    {1: {CLOSE_ACCOUNT: -0.1, WHY_NOT: 0.4}},
)  # fmt: skip


def decided(
    top: tuple[tuple[str, float], ...], question: str = "How do I close my account?"
) -> Decided:
    return Decided("kinetic", question, frozenset({CLOSE_ACCOUNT}), top, threshold=0.48)  # fmt: skip


def test_the_replay_answers_as_the_verbatim_rule_does() -> None:
    assert answered(decided(((WHY_NOT, 0.76), (CLOSE_ACCOUNT, 0.60))), None, KNOWN, 0.09) == WHY_NOT
    close = decided(((WHY_NOT, 0.76), (CLOSE_ACCOUNT, 0.71)))
    assert answered(close, None, KNOWN, 0.09) == ""  # a close call
    assert answered(decided(((WHY_NOT, 0.45), (CLOSE_ACCOUNT, 0.2))), None, KNOWN, 0.09) == ""


def test_the_question_kind_settles_a_close_call_only_when_one_entry_alone_asks_it() -> None:
    close = decided(((WHY_NOT, 0.76), (CLOSE_ACCOUNT, 0.71)))
    assert answered(close, "kind", KNOWN, 0.09) == CLOSE_ACCOUNT  # how, not why
    assert answered(decided(close.top, "Why can't I close it?"), "kind", KNOWN, 0.09) == WHY_NOT
    under = decided(((WHY_NOT, 0.50), (CLOSE_ACCOUNT, 0.45)))  # the runner-up under the threshold
    assert answered(under, "kind", KNOWN, 0.09) == ""
    assert answered(decided(close.top, "close account"), "kind", KNOWN, 0.09) == ""  # keywords


def test_the_hub_penalty_reorders_before_the_rule_is_applied() -> None:
    close = decided(((WHY_NOT, 0.76), (CLOSE_ACCOUNT, 0.71)))
    # 0.76 - 0.3 x 0.4 = 0.64 against 0.71 + 0.3 x 0.1 = 0.74: the specific entry leads by 0.10
    assert answered(close, (1, 0.3), KNOWN, 0.09) == CLOSE_ACCOUNT
    assert answered(close, (1, 0.05), KNOWN, 0.09) == ""


def test_hub_scores_are_centred_and_highest_for_the_entry_nearest_the_others(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    faq = tmp_path / "faq.jsonl"
    questions = [
        "How do I top up my wallet?",
        "How do I top up my wallet with a card?",
        "How do I top up my wallet at a store?",
        "Where is your head office?",
    ]
    faq.write_text(
        "\n".join(f'{{"id": "e{n}", "question": "{q}"}}' for n, q in enumerate(questions))
    )
    hubs = entries(faq, embedder).hubs[3]
    assert abs(sum(hubs.values())) < 1e-6
    assert min(hubs, key=hubs.__getitem__) == "e3" and hubs["e0"] > 0


def test_the_query_maps_gradient_is_the_losss() -> None:
    draw = np.random.default_rng(3)

    def unit(rows: int) -> np.ndarray:
        x = draw.normal(size=(rows, 6))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    kb = Asked(unit(5), unit(4), unit(4), [[0], [1, 2], [3], [0], [2]])
    w = np.eye(6) + 0.1 * draw.normal(size=(6, 6))

    def loss(w: np.ndarray) -> float:
        mapped = kb.questions @ w.T
        logits = (mapped / np.linalg.norm(mapped, axis=1, keepdims=True)) @ kb.entries(0.3).T / 0.05
        logits -= logits.max(axis=1, keepdims=True)
        log_chance = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return float(-sum(log_chance[row, gold].mean() for row, gold in enumerate(kb.gold)))

    step, numeric = 1e-6, np.zeros_like(w)
    for i, j in np.ndindex(*w.shape):
        nudged = w.copy()
        nudged[i, j] += step
        numeric[i, j] = (loss(nudged) - loss(w)) / step
    assert np.allclose(gradient(w, kb, 0.3), numeric, atol=1e-3)
    assert recall_at_1(fit([kb], 0.3, 0.0), kb, 0.3) >= recall_at_1(np.eye(6), kb, 0.3)
