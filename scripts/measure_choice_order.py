"""Measure which order of the offered entries reaches a gold entry most often (docs/RESULTS.md,
"Choices": the second opinion's order was chosen with it).

    .venv/bin/python scripts/measure_choice_order.py ewallet telco gym courier medquad semeval dstc11

Each named fitting KB is ingested into a scratch data dir and its English queries asked without
the chat model, the second opinion switched on (its knob is off by default; the model from
`data/models` or GUARDRAG_LLM_MODEL_DIR). For every query
with a gold entry that ends in choices with the second opinion asked, three orders of the
candidates are compared by whether a gold entry is among the first three: MiniLM's fused
ranking (rerank's `top`), the second opinion's (its `top`), and the two interleaved. covidfaq is
never measured here (held out).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from _scratch import FITTING_SETS as SETS
from _scratch import SAMPLE, SEED, english_cases, gold_of, scratch_bot

ORDERS = ("fused", "interleaved", "second opinion")


def choice_cases(kb: str) -> list[dict[str, Any]]:
    """`kb`'s cases with gold that end in choices with the second opinion asked: both orders."""
    faq, golden = SETS[kb]
    bot = scratch_bot(kb, faq)
    found = []
    for case in english_cases(golden, SAMPLE, SEED):
        gold = gold_of(case)
        result = bot.ask(case["question"], kb=kb, knobs={"use_llm": False, "second_opinion": True})
        decided = [d for d in result.trail if d.node == "rerank"]
        second = decided[-1].detail.get("second_opinion", {}) if decided else {}
        if not gold or result.outcome != "choices" or "top" not in second:
            continue
        fused = [entry["source_id"] for entry in decided[-1].detail.get("top", [])]
        found.append(
            {"gold": gold, "fused": fused, "second": [e["source_id"] for e in second["top"]]}
        )
    bot.close()
    return found


def offered(case: dict[str, Any], order: str) -> list[str]:
    """The first three entries of `order`."""
    if order == "fused":
        return case["fused"][:3]
    if order == "second opinion":
        return case["second"][:3]
    mixed: list[str] = []
    for pair in zip(case["fused"], case["second"], strict=False):
        mixed += [entry for entry in pair if entry not in mixed]
    return mixed[:3]


def main() -> None:
    kbs = sys.argv[1:] or list(SETS)
    reached: dict[str, dict[str, int]] = defaultdict(dict)
    counts = {}
    for kb in kbs:
        cases = choice_cases(kb)
        counts[kb] = len(cases)
        for order in ORDERS:
            reached[kb][order] = sum(bool(set(offered(c, order)) & set(c["gold"])) for c in cases)
    print("| KB | cases | " + " | ".join(ORDERS) + " |")
    print("|---|---|" + "---|" * len(ORDERS))
    for kb in kbs:
        print(f"| {kb} | {counts[kb]} | " + " | ".join(str(reached[kb][o]) for o in ORDERS) + " |")
    total = {o: sum(reached[kb][o] for kb in kbs) for o in ORDERS}
    print(f"| all | {sum(counts.values())} | " + " | ".join(str(total[o]) for o in ORDERS) + " |")


if __name__ == "__main__":
    main()
