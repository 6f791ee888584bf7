"""Where the verbatim rule's unanswered questions are, and what answering them would cost
(docs/DECISION.md, "Where the unsure questions are").

    .venv/bin/python scripts/measure_unsure.py ewallet telco gym courier medquad semeval

Each named fitting KB is ingested into a scratch data dir and its English questions asked
without the chat model, at the default knobs. Every one-part question that rerank did not
answer is placed in the zone that stopped it (its best entry at or above the KB's threshold but
within `faq_margin` of its rival; under the threshold; under `min_relevance`) and counted by
where its gold entry ranks, or as a question that must be refused. Answering the best entry of a
zone would be right only for its "gold first" column. The verbatim answers (semantic matches)
are also counted, right and wrong, by two signals that might tell an entry that answers from one
on the same topic: the entry's question asks another kind, the question holds a word the KB never
uses. covidfaq is never measured here (held out).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from _scratch import FITTING_SETS, SAMPLE, SEED, english_cases, gold_of, scratch_bot

from guardrag.config.run_config import RunConfig
from guardrag.core.text import content_words, question_kind

ZONES = ("close lead", "under the threshold", "under min_relevance")
PLACES = ("gold first", "gold 2nd-3rd", "gold further or none", "must refuse")
SIGNALS = ("another kind", "a word the KB never uses")


def zone(top: list[dict[str, Any]], lead: float, threshold: float, run: RunConfig) -> str:
    """Which rule stopped an unanswered question whose best entries are `top`."""
    best = top[0]["score"]
    if best < run.min_relevance:
        return "under min_relevance"
    return "close lead" if best >= threshold and lead < run.faq_margin else "under the threshold"


def place(top: list[dict[str, Any]], gold: list[str]) -> str:
    """Where the gold entry ranks among rerank's `top` (its first three)."""
    if not gold:
        return "must refuse"
    ranks = [i for i, entry in enumerate(top) if entry["source_id"] in gold]
    if not ranks:
        return "gold further or none"
    return "gold first" if ranks[0] == 0 else "gold 2nd-3rd"


def signals(question: str, entry: dict[str, str], vocabulary: set[str]) -> list[str]:
    """Which of SIGNALS a verbatim answer of `entry` to `question` has."""
    found = []
    if question_kind(question) != question_kind(entry["question"]):
        found.append(SIGNALS[0])
    if set(content_words(question)) - vocabulary:
        found.append(SIGNALS[1])
    return found


def measure(kb: str) -> Counter[tuple[str, str]]:
    """(zone, place) counts of `kb`'s unanswered one-part questions, ("answered", right or
    wrong) of its answered ones, and (signal, right or wrong) of its verbatim answers."""
    faq, golden = FITTING_SETS[kb]
    rows = [json.loads(line) for line in Path(faq).read_text().splitlines() if line.strip()]
    entries = {row["id"]: row for row in rows}
    vocabulary = {
        w for e in entries.values() for w in content_words(f"{e['question']} {e['answer']}")
    }
    bot, run, counts = scratch_bot(kb, faq), RunConfig(), Counter[tuple[str, str]]()
    for case in english_cases(golden, SAMPLE, SEED):
        gold = gold_of(case)
        result = bot.ask(case["question"], kb=kb, knobs={"use_llm": False})
        if result.outcome == "answered":
            cited = [c.source_id for c in result.citations]
            verdict = "right" if cited[:1] and cited[0] in gold else "wrong"
            counts["answered", verdict] += 1
            if result.route == "semantic_match" and cited[0] in entries:
                counts["verbatim", verdict] += 1
                for signal in signals(case["question"], entries[cited[0]], vocabulary):
                    counts[signal, verdict] += 1
            continue
        decided = [d for d in result.trail if d.node == "rerank"]
        detail = decided[-1].detail if decided else {}
        if not detail.get("top") or "asked" in detail or decided[-1].threshold is None:
            continue  # refused before rerank, no FAQ entry, or several parts
        where = zone(detail["top"], float(detail.get("lead", 0.0)), decided[-1].threshold, run)
        counts[where, place(detail["top"], gold)] += 1
    bot.close()
    return counts


def main() -> None:
    kbs = sys.argv[1:] or [kb for kb in FITTING_SETS if kb != "dstc11"]
    counts = {kb: measure(kb) for kb in kbs}
    counts["all"] = sum(counts.values(), Counter())
    print("| KB | answered right / wrong | " + " | ".join(ZONES) + " |")
    print("|---|---|" + "---|" * len(ZONES))
    for kb, found in counts.items():
        cells = [" / ".join(str(found[z, p]) for p in PLACES) for z in ZONES]
        print(
            f"| {kb} | {found['answered', 'right']} / {found['answered', 'wrong']} | "
            + " | ".join(cells)
            + " |"
        )
    print(f"\nEach zone: {' / '.join(PLACES)}.\n")
    every = counts["all"]
    print("| verbatim answers (semantic matches) | right | wrong |\n|---|---|---|")
    for row in ("verbatim", *SIGNALS):
        print(f"| {row} | {every[row, 'right']} | {every[row, 'wrong']} |")


if __name__ == "__main__":
    main()
