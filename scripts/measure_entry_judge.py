"""Measure the chat model as a judge of unsure FAQ entries (measured, not adopted: docs/DECISION.md).

    .venv/bin/python scripts/measure_entry_judge.py    # collect (cached in --cache), then report

When rerank is unsure which FAQ entry answers a question, could the bundled model pick it? Each
entry that would be offered is put to the model alone, "does this entry answer the question?"
(the answer judge's prompt, `passage_judge.states_answer`), read as P(YES); a judge would answer
with the entry the model prefers when its P(YES) reaches a floor and leads the next entry's by a
margin, and offer the entries otherwise. (Asked to name the entry among a numbered list, the
1.5B model names the first one whatever it says.) This script measures that judge:

1. collect: each fitting KB (our golden sets) is ingested into a scratch data dir and its
   golden English cases asked without the model (the second opinion on); every case offered
   choices at rerank (the unsure FAQ path) is kept with the entries offered, and the bundled
   model's P(YES) for each (cached as JSON lines in `--cache`, outside the repository);
2. report: how often the model's favourite is a gold entry, against the reranker's own first;
   and, over a grid of (floor, margin), the pair with the most right answers minus `PENALTY` x
   wrong ones, judged leave-one-KB-out (chosen on three KBs, counted on the fourth).

A case is right when the preferred entry is one of its gold entries, wrong when it is not or the
case must be refused. covidfaq and NG12 are never collected here (held out).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from _scratch import REPO, english_cases, gold_of, scratch_bot

from guardrag.config.settings import Settings
from guardrag.core.llm.client import load_chat_model
from guardrag.core.passage_judge import states_answer

KBS = ("ewallet", "telco", "gym", "courier")
#: telco has 400 golden cases: a fixed sample keeps the model's part short.
SAMPLE = 120
SEED = 37
PENALTY = 5.0
FLOORS = [round(0.40 + 0.05 * i, 2) for i in range(10)]
MARGINS = [round(0.05 * i, 2) for i in range(8)]


def collect(kb: str, cache: Path) -> list[dict[str, Any]]:
    """The unsure cases of `kb` with the model's P(YES) for each offered entry (cached)."""
    path = cache / f"{kb}.jsonl"
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines()]
    rows = _unsure_cases(kb)
    model = load_chat_model(Settings(llm_local=True))
    if model is None:
        sys.exit("no chat model: run `make llm`")
    for row in rows:
        row["p_yes"] = [states_answer(row["question"], text, model).p_yes for text in row["texts"]]
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _unsure_cases(kb: str) -> list[dict[str, Any]]:
    """`kb`'s golden English cases that rerank offered choices for, without the model."""
    faq = REPO / "datasets" / kb / "faq.jsonl"
    entries = {r["id"]: r for r in map(json.loads, faq.read_text().splitlines())}
    bot = scratch_bot(kb, faq)
    rows = []
    for case in english_cases(REPO / "datasets" / kb / "golden.jsonl", SAMPLE, SEED):
        result = bot.ask(case["question"], kb=kb, knobs={"use_llm": False})
        if result.outcome != "choices" or result.refusal is None:
            continue
        if result.refusal.stage != "rerank":
            continue
        offered = [c.source_id for c in result.choices]
        rows.append(
            {
                "kb": kb,
                "id": case["id"],
                "question": case["question"],
                "offered": offered,
                "gold": gold_of(case),
                "texts": [
                    entry_text(entries[s]["question"], entries[s]["answer"]) for s in offered
                ],
            }
        )
    bot.close()
    return rows


def entry_text(question: str, answer: str) -> str:
    """An FAQ entry as the judge reads it: its question, then its answer."""
    return f"Q: {question}\nA: {answer}"


def preferred(p_yes: list[float], floor: float, margin: float) -> int | None:
    """The index of the entry with the highest P(YES), when it reaches `floor` and leads the
    next highest by `margin`; None otherwise (the entries are offered)."""
    if not p_yes:
        return None
    best = max(range(len(p_yes)), key=lambda i: p_yes[i])
    runner_up = max((p for i, p in enumerate(p_yes) if i != best), default=0.0)
    return best if p_yes[best] >= floor and p_yes[best] - runner_up >= margin else None


def tally(rows: list[dict[str, Any]], floor: float, margin: float) -> tuple[int, int]:
    """Right and wrong answers of the rule over `rows`."""
    right = wrong = 0
    for row in rows:
        best = preferred(row["p_yes"], floor, margin)
        if best is not None:
            is_gold = row["offered"][best] in row["gold"]
            right, wrong = right + is_gold, wrong + (not is_gold)
    return right, wrong


def choose(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """The (floor, margin) with the most right - PENALTY x wrong over `rows` (ties: stricter)."""

    def gain(pair: tuple[float, float]) -> tuple[float, float, float]:
        right, wrong = tally(rows, *pair)
        return right - PENALTY * wrong, pair[0], pair[1]

    return max(itertools.product(FLOORS, MARGINS), key=gain)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "entry-judge")
    args = parser.parse_args()
    by_kb = {kb: collect(kb, args.cache) for kb in KBS}
    every = [row for rows in by_kb.values() for row in rows]
    favourite = sum(r["offered"][preferred(r["p_yes"], 0.0, 0.0) or 0] in r["gold"] for r in every)
    first = sum(r["offered"][0] in r["gold"] for r in every)
    reachable = sum(bool(set(r["offered"]) & set(r["gold"])) for r in every)
    print(
        f"{len(every)} unsure cases; a gold entry offered in {reachable}; the reranker's first is "
        f"gold in {first}, the model's favourite in {favourite}\n"
    )
    print(
        "| KB left out | unsure cases | gold offered | floor, margin (on the others) | right | wrong |"
    )
    print("|---|---|---|---|---|---|")
    for kb, rows in by_kb.items():
        others = [row for row in every if row["kb"] != kb]
        floor, margin = choose(others)
        right, wrong = tally(rows, floor, margin)
        reachable = sum(bool(set(r["offered"]) & set(r["gold"])) for r in rows)
        print(f"| {kb} | {len(rows)} | {reachable} | {floor}, {margin} | {right} | {wrong} |")
    floor, margin = choose(every)
    right, wrong = tally(every, floor, margin)
    print(f"\nchosen on all {len(every)} unsure cases: floor {floor}, margin {margin}:", end=" ")
    print(f"{right} right, {wrong} wrong")


if __name__ == "__main__":
    main()
