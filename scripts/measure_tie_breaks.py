"""Two more ways to settle the verbatim rule's doubt, measured on the fitting KBs (docs/DECISION.md,
"Three more readers that do not pay").

    .venv/bin/python scripts/measure_tie_breaks.py ewallet telco gym courier medquad semeval

Each named fitting KB is ingested into a scratch data dir and its English questions asked without
the chat model, at the default knobs. Every one-part question whose best rerank candidate is an FAQ
entry (exact matches left out) is replayed under the verbatim rule (the KB's threshold, a lead of
`faq_margin` over the runner-up; twins are not read here, so the replay is a little stricter than
the pipeline) and two changes to it:

- **kind**: in a close call (best at or above the threshold, runner-up within the margin), answer
  the one of the first two entries that alone asks the question's kind (`text.question_kind`:
  "How do I close my account?" is a how-question, "Why can't I close my account?" a why-one).
- **hubness**: an entry close to many others is a general one that ranks near the top of many
  questions it does not answer (a hub); its score is lowered by beta x (its mean title cosine to
  its k nearest entries, less the KB's mean of that), and the rule is applied to the new order.
  (k, beta) is chosen leave one KB out by right - 5 x wrong against no change.

covidfaq is never measured here (held out).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _scratch import FITTING_SETS, SAMPLE, SEED, english_cases, gold_of, rows_of, scratch_bot

from guardrag.config.run_config import RunConfig
from guardrag.core.embedder import Encoder, load_embedder
from guardrag.core.text import question_kind

NEIGHBOURS = (1, 3, 5, 10)
BETAS = (0.05, 0.1, 0.2, 0.3)
#: A change to the rule: None (the rule as it is), "kind", or (k, beta) for the hub penalty.
Change = str | tuple[int, float] | None


@dataclass(frozen=True)
class Decided:
    """A one-part question that reached rerank with an FAQ entry first."""

    kb: str
    question: str
    gold: frozenset[str]
    top: tuple[tuple[str, float], ...]  # rerank's first three: (entry id, fused score)
    threshold: float


@dataclass(frozen=True)
class Entries:
    """A KB's entries as the tie-breaks read them."""

    questions: dict[str, str]  # entry id -> its question
    hubs: dict[int, dict[str, float]]  # k -> entry id -> its hub score (see `hub_scores`)


def decided(kb: str) -> list[Decided]:
    """`kb`'s questions that rerank decided on an FAQ entry, exact matches left out."""
    faq, golden = FITTING_SETS[kb]
    bot, found = scratch_bot(kb, faq), []
    for case in english_cases(golden, SAMPLE, SEED):
        result = bot.ask(case["question"], kb=kb, knobs={"use_llm": False})
        steps = [d for d in result.trail if d.node == "rerank"]
        detail = steps[-1].detail if steps else {}
        top = tuple((e["source_id"], float(e["score"])) for e in detail.get("top") or [])
        if result.route == "exact_match" or len(top) < 2 or "asked" in detail:
            continue
        if steps[-1].threshold is not None:
            gold = frozenset(gold_of(case))
            found.append(Decided(kb, case["question"], gold, top, steps[-1].threshold))
    bot.close()
    return found


def entries(faq: Path, encoder: Encoder) -> Entries:
    """The entries of `faq` and their hub scores: for each k of NEIGHBOURS, an entry's mean
    title cosine to its k nearest entries (`encoder`: MiniLM, as the reranker's), less the KB's
    mean."""
    rows = rows_of(faq)
    vectors = encoder.embed([row["question"] for row in rows])
    near = vectors @ vectors.T
    np.fill_diagonal(near, -1.0)
    nearest = -np.sort(-near, axis=1)
    hubs = {}
    for k in NEIGHBOURS:
        mean = nearest[:, :k].mean(axis=1)
        hubs[k] = {row["id"]: float(m) for row, m in zip(rows, mean - mean.mean(), strict=True)}
    return Entries({row["id"]: row["question"] for row in rows}, hubs)


def by_kind(row: Decided, known: Entries) -> str:
    """Of a close call's first two entries, the one that alone asks the question's kind (the
    runner-up only at or above the threshold), or ""."""
    asked = question_kind(row.question)
    (best, _), (second, rival) = row.top[0], row.top[1]
    same = [question_kind(known.questions.get(entry, "")) == asked for entry in (best, second)]
    if same == [True, False]:
        return best
    return second if same == [False, True] and rival >= row.threshold else ""


def answered(row: Decided, change: Change, known: Entries, margin: float) -> str:
    """The entry the rule answers `row` with under `change`, or "" when it does not answer."""
    top = list(row.top)
    if isinstance(change, tuple):
        k, beta = change
        top = sorted(
            ((e, s - beta * known.hubs[k].get(e, 0.0)) for e, s in top), key=lambda t: -t[1]
        )
    (best, score), (_, rival) = top[0], top[1]
    if score < row.threshold:
        return ""
    if score - rival >= margin:
        return best
    return by_kind(row, known) if change == "kind" else ""


def tally(rows: list[Decided], change: Change, known: dict[str, Entries]) -> tuple[int, int]:
    """(right, wrong) answers of the rule under `change` over `rows`."""
    margin = RunConfig().faq_margin
    right = wrong = 0
    for row in rows:
        entry = answered(row, change, known[row.kb], margin)
        right += bool(entry) and entry in row.gold
        wrong += bool(entry) and entry not in row.gold
    return right, wrong


def gain(rows: list[Decided], change: Change, known: dict[str, Entries]) -> int:
    """right - 5 x wrong of `change` over the rule as it is."""
    (r, w), (r0, w0) = tally(rows, change, known), tally(rows, None, known)
    return (r - 5 * w) - (r0 - 5 * w0)


def main() -> None:
    kbs = [a for a in sys.argv[1:] if not a.startswith("--")]
    kbs = kbs or [kb for kb in FITTING_SETS if kb != "dstc11"]
    encoder = load_embedder()
    known = {kb: entries(FITTING_SETS[kb][0], encoder) for kb in kbs}
    rows = [row for kb in kbs for row in decided(kb)]
    print("| KB | questions | rule: right / wrong | kind: right / wrong | hub, best on all KBs |")
    print("|---|---|---|---|---|")
    grid: list[Change] = [None, *((k, b) for k in NEIGHBOURS for b in BETAS)]
    best = max(grid, key=lambda change: gain(rows, change, known))
    for kb in kbs:
        mine = [row for row in rows if row.kb == kb]
        cells = [" / ".join(map(str, tally(mine, c, known))) for c in (None, "kind", best)]
        print(f"| {kb} | {len(mine)} | " + " | ".join(cells) + " |")
    print(f"\nkind over the rule, right - 5 x wrong: {gain(rows, 'kind', known)}")
    print(f"hub (k, beta) best on all KBs: {best}, {gain(rows, best, known)}")
    total = 0
    for kb in kbs:
        others = [row for row in rows if row.kb != kb]
        chosen = max(grid, key=lambda change: gain(others, change, known))
        left_out = gain([row for row in rows if row.kb == kb], chosen, known)
        total += left_out
        print(f"  {kb} left out: {chosen} chosen on the others, {left_out} on it")
    print(f"  leave one KB out, summed: {total}")


if __name__ == "__main__":
    main()
