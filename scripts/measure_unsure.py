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
uses. With `--sentences`, a third: how close the best sentence of each of the top three entries'
answers is to the question (all-mpnet-base-v2 cosine, `data/models`), as a rule that answers a
close call or vetoes a verbatim answer, its two cut-offs chosen leave one KB out by right - 5 x
wrong. covidfaq is never measured here (held out).
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import numpy as np
from _scratch import (
    FITTING_SETS,
    MODELS,
    SAMPLE,
    SEED,
    english_cases,
    gold_of,
    rows_of,
    scratch_bot,
)

from guardrag.config.run_config import RunConfig
from guardrag.config.settings import Settings
from guardrag.core.embedder import Encoder
from guardrag.core.grounding.split import split_sentences
from guardrag.core.mpnet import installed_mpnet
from guardrag.core.text import content_words, question_kind

ZONES = ("close lead", "under the threshold", "under min_relevance")
PLACES = ("gold first", "gold 2nd-3rd", "gold further or none", "must refuse")
SIGNALS = ("another kind", "a word the KB never uses")
#: The sentence rule's cut-offs: the best sentence's cosine, and its lead over the rivals' best.
FLOORS = np.round(np.arange(0.30, 0.80, 0.02), 2)
GAPS = np.round(np.arange(-0.10, 0.30, 0.02), 2)
#: A sentence read: (KB, "close lead" or "verbatim", right?, best-sentence cosine of each entry).
Read = tuple[str, str, bool, list[float]]


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


def sentence_read(encoder: Encoder, question: str, answers: list[str]) -> list[float]:
    """For each answer, the cosine of its sentence closest to `question`."""
    asked = encoder.embed([question])[0]  # unit length, as the sentences'
    reads = []
    for answer in answers:
        sentences = [s for line in answer.splitlines() for s in split_sentences(line)][:12]
        found = encoder.embed(sentences or [answer])
        reads.append(float(np.max(found @ asked)))
    return reads


def measure(kb: str, encoder: Encoder | None = None) -> tuple[Counter[tuple[str, str]], list[Read]]:
    """(zone, place) counts of `kb`'s unanswered one-part questions, ("answered", right or
    wrong) of its answered ones, (signal, right or wrong) of its verbatim answers; with an
    `encoder`, the sentence reads of its close calls and verbatim answers."""
    faq, golden = FITTING_SETS[kb]
    rows = rows_of(faq)
    entries = {row["id"]: row for row in rows}
    vocabulary = {
        w for e in entries.values() for w in content_words(f"{e['question']} {e['answer']}")
    }
    bot, run, counts = scratch_bot(kb, faq), RunConfig(), Counter[tuple[str, str]]()
    reads: list[Read] = []

    def read(kind: str, right: bool, question: str, top: list[dict[str, Any]]) -> None:
        answers = [entries[e["source_id"]]["answer"] for e in top if e["source_id"] in entries]
        if encoder is not None and answers:
            reads.append((kb, kind, right, sentence_read(encoder, question, answers)))

    for case in english_cases(golden, SAMPLE, SEED):
        gold = gold_of(case)
        result = bot.ask(case["question"], kb=kb, knobs={"use_llm": False})
        decided = [d for d in result.trail if d.node == "rerank"]
        detail = decided[-1].detail if decided else {}
        if result.outcome == "answered":
            cited = [c.source_id for c in result.citations]
            verdict = "right" if cited[:1] and cited[0] in gold else "wrong"
            counts["answered", verdict] += 1
            if result.route == "semantic_match" and cited[0] in entries:
                counts["verbatim", verdict] += 1
                for signal in signals(case["question"], entries[cited[0]], vocabulary):
                    counts[signal, verdict] += 1
                read("verbatim", verdict == "right", case["question"], detail.get("top") or [])
            continue
        if not detail.get("top") or "asked" in detail or decided[-1].threshold is None:
            continue  # refused before rerank, no FAQ entry, or several parts
        where = zone(detail["top"], float(detail.get("lead", 0.0)), decided[-1].threshold, run)
        counts[where, place(detail["top"], gold)] += 1
        if where == "close lead":
            read(where, place(detail["top"], gold) == "gold first", case["question"], detail["top"])
    bot.close()
    return counts, reads


def passes(read: list[float], floor: float, gap: float) -> bool:
    """Whether the first entry's best sentence reaches `floor` and leads the others' by `gap`."""
    rivals = max(read[1:], default=0.0)
    return read[0] >= floor and read[0] - rivals >= gap


def gain(reads: list[Read], cuts: tuple[float, float] | None) -> int:
    """right - 5 x wrong added by the sentence rule at `cuts` (floor, gap): close calls it
    answers, verbatim answers it vetoes (a wrong one saved counts 5, a right one lost 1); no
    rule (None) adds nothing."""
    if cuts is None:
        return 0
    floor, gap = cuts
    total = 0
    for _, kind, right, read in reads:
        if kind == "close lead" and passes(read, floor, gap):
            total += 1 if right else -5
        elif kind == "verbatim" and not passes(read, floor, gap):
            total += -1 if right else 5
    return total


def sentence_rule(reads: list[Read], kind: str) -> None:
    """The sentence rule for `kind` alone ("close lead": answer; "verbatim": veto), its cut-offs
    chosen on all KBs and leave one KB out, against no rule at all (None, which scores 0)."""
    chosen = [r for r in reads if r[1] == kind]
    kbs = sorted({r[0] for r in chosen})
    grid: list[tuple[float, float] | None] = [
        None,
        *((float(f), float(g)) for f in FLOORS for g in GAPS),
    ]
    best = max(grid, key=lambda cuts: gain(chosen, cuts))
    print(f"\n{kind}: best on all KBs (floor, gap) {best}: {gain(chosen, best)}")
    total = 0
    for kb in kbs:
        others = [r for r in chosen if r[0] != kb]
        cuts = max(grid, key=lambda cuts: gain(others, cuts))
        left_out = gain([r for r in chosen if r[0] == kb], cuts)
        total += left_out
        print(f"  {kb} left out: {cuts} chosen on the others, {left_out} on it")
    print(f"  leave one KB out, summed: {total}")


def main() -> None:
    kbs = [a for a in sys.argv[1:] if not a.startswith("--")]
    kbs = kbs or [kb for kb in FITTING_SETS if kb != "dstc11"]
    encoder = None
    if "--sentences" in sys.argv:
        encoder, problem = installed_mpnet(Settings(llm_local=False, llm_model_dir=MODELS))
        if encoder is None:
            sys.exit(f"--sentences needs all-mpnet-base-v2: {problem}")
    measured = {kb: measure(kb, encoder) for kb in kbs}
    counts = {kb: found for kb, (found, _) in measured.items()}
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
    if encoder is not None:
        reads = [r for _, found in measured.values() for r in found]
        for kind in ("close lead", "verbatim"):
            sentence_rule(reads, kind)


if __name__ == "__main__":
    main()
