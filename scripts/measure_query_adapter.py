"""A learned linear map on MiniLM's question vectors, fitted on the other fitting KBs: does it
rank the gold entry first more often on the KB left out? (docs/DECISION.md, "Three more readers
that do not pay"; it does not.)

    .venv/bin/python scripts/measure_query_adapter.py

For each fitting KB, its entries' question and answer vectors and its English questions with gold
are embedded (no ingest: every entry is scored, no retrieval cut-off). The map W (384 x 384,
starting at the identity, L2 towards it) is fitted by gradient descent on the softmax over the
KB's entries (temperature 0.05) of cos(W q, entry), where an entry's vector is its question's,
or (1 - mix) x question + mix x answer. Recall@1 on each KB left out is compared with no map.
covidfaq is never measured here (held out).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from _scratch import FITTING_SETS, SAMPLE, SEED, english_cases, gold_of, rows_of

from guardrag.core.embedder import Encoder, load_embedder

MIXES = (0.0, 0.3)
PENALTIES = (0.1, 0.01)
STEPS, RATE, TEMPERATURE = 300, 0.5, 0.05


@dataclass(frozen=True)
class Asked:
    """A KB's questions with gold and its entries, embedded."""

    questions: np.ndarray  # one unit vector a question
    titles: np.ndarray  # one an entry: its question
    answers: np.ndarray  # one an entry: its answer
    gold: list[list[int]]  # each question's gold entries (row numbers)

    def entries(self, mix: float) -> np.ndarray:
        return (1 - mix) * self.titles + mix * self.answers


def asked(kb: str, encoder: Encoder) -> Asked:
    """`kb`'s questions that have a gold entry in it, and its entries, embedded by `encoder`."""
    faq, golden = FITTING_SETS[kb]
    rows = rows_of(faq)
    row_of = {row["id"]: n for n, row in enumerate(rows)}
    cases = [
        (c["question"], [row_of[g] for g in gold_of(c) if g in row_of])
        for c in english_cases(golden, SAMPLE, SEED)
    ]
    cases = [(question, gold) for question, gold in cases if gold]
    embed = encoder.embed
    return Asked(
        embed([question for question, _ in cases]),
        embed([row["question"] for row in rows]),
        embed([row["answer"] for row in rows]),
        [gold for _, gold in cases],
    )


def recall_at_1(w: np.ndarray, kb: Asked, mix: float) -> float:
    mapped = kb.questions @ w.T
    first = (mapped @ kb.entries(mix).T).argmax(axis=1)  # the norm of W q ranks nothing
    return float(np.mean([top in gold for top, gold in zip(first, kb.gold, strict=True)]))


def gradient(w: np.ndarray, kb: Asked, mix: float) -> np.ndarray:
    """The gradient of the summed softmax loss of `kb`'s questions with respect to W."""
    entries = kb.entries(mix)
    mapped = kb.questions @ w.T
    norms = np.linalg.norm(mapped, axis=1, keepdims=True)
    unit = mapped / norms
    logits = unit @ entries.T / TEMPERATURE
    chance = np.exp(logits - logits.max(axis=1, keepdims=True))
    chance /= chance.sum(axis=1, keepdims=True)
    target = np.zeros_like(chance)
    for row, gold in enumerate(kb.gold):
        target[row, gold] = 1 / len(gold)
    d_unit = (chance - target) / TEMPERATURE @ entries
    d_mapped = (d_unit - unit * (d_unit * unit).sum(axis=1, keepdims=True)) / norms
    return d_mapped.T @ kb.questions


def fit(kbs: list[Asked], mix: float, penalty: float) -> np.ndarray:
    identity = np.eye(kbs[0].questions.shape[1])
    w = identity.copy()
    count = sum(len(kb.gold) for kb in kbs)
    for _ in range(STEPS):
        step = sum(gradient(w, kb, mix) for kb in kbs) / count + penalty * (w - identity)
        w -= RATE * step
    return w


def main() -> None:
    encoder = load_embedder()
    kbs = {kb: asked(kb, encoder) for kb in FITTING_SETS}
    for mix in MIXES:
        identity = np.eye(next(iter(kbs.values())).questions.shape[1])
        before = {kb: recall_at_1(identity, data, mix) for kb, data in kbs.items()}
        print(
            f"mix {mix}: recall@1 with no map "
            + ", ".join(f"{k} {v:.3f}" for k, v in before.items())
        )
        for penalty in PENALTIES:
            after = {
                kb: recall_at_1(
                    fit([d for k, d in kbs.items() if k != kb], mix, penalty), data, mix
                )
                for kb, data in kbs.items()
            }
            change = np.mean([after[kb] - before[kb] for kb in kbs])
            cells = ", ".join(f"{k} {v:.3f}" for k, v in after.items())
            print(f"  L2 {penalty}, each KB left out: {cells} (mean change {change:+.4f})")


if __name__ == "__main__":
    main()
