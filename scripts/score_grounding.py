"""Score the grounding check: rejection of unsupported answers, pass rate of correct ones, latency.

Runs check_grounding over datasets/grounding/adversarial.jsonl and, when the shared seed data is
present (../shared/data/seeds), over answers built from real KB text: each GuidelineIQ passage and
TNGD FAQ answer cited as [n] among two distractor passages, light paraphrases of it (expected
supported), and perturbations of it (changed number, inserted negation, swapped entity, citation to
a missing passage; expected unsupported).

    .venv/bin/python scripts/score_grounding.py [--min-similarity X] [--min-overlap Y] [-v]
    .venv/bin/python scripts/score_grounding.py --sweep      # grid over both thresholds
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from guardrag.core.embedder import Embedder, OnnxEmbedder  # noqa: E402
from guardrag.core.grounding import (  # noqa: E402
    DEFAULT_MIN_OVERLAP,
    DEFAULT_MIN_SIMILARITY,
    Passage,
    check_grounding,
    split_sentences,
)

ADVERSARIAL = ROOT / "datasets" / "grounding" / "adversarial.jsonl"
SEEDS = ROOT.parent / "shared" / "data" / "seeds"
GUIDELINES = SEEDS / "guideline-iq" / "finance_guidelines.jsonl"
FAQ = SEEDS / "tngd-faq" / "sample.json"
DISTRACTORS = 2  # passages given besides the right one, as retrieval would


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    passages: tuple[Passage, ...]
    answer: str
    expected: str  # "supported" | "unsupported"
    known_gap: bool = False  # a documented miss of this version: scored apart, not in the targets


def load_adversarial(path: Path = ADVERSARIAL) -> list[Case]:
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        passages = tuple(Passage(p["number"], p["source_id"], p["text"]) for p in row["passages"])
        cases.append(
            Case(
                row["id"],
                row["family"],
                passages,
                row["answer"],
                row["expected"],
                bool(row.get("known_gap", False)),
            )
        )
    return cases


# ------------------------------------------------------------------ cases from the real KB text

#: Light paraphrases a model plausibly writes; each keeps the facts.
_SYNONYMS = {
    r"\bensures\b": "makes sure",
    r"\ballows you to\b": "lets you",
    r"\bis required\b": "is needed",
    r"\bapproximately\b": "about",
    r"\bview\b": "see",
    r"\bpurchase\b": "buying",
    r"\bconvenient\b": "easy",
    r"\bshould\b": "ought to",
    r"\bIf you're\b": "If you are",
}
_CONTRACTIONS = {r"\bdo not\b": "don't", r"\bcannot\b": "can't", r"\bis not\b": "isn't"}
_NEGATIONS = [  # first match wins: insert a negation a model could hallucinate
    (r"\bmust\b", "must not"),
    (r"\bshould\b", "should not"),
    (r"\bcan\b", "cannot"),
    (r"\bwill\b", "will not"),
    (r"\bis\b", "is not"),
    (r"\bare\b", "are not"),
    (r"\brequire\b", "do not require"),
]
_DE_NEGATIONS = [(r"\bnot\s+", ""), (r"\bno\b", "a"), (r"\bcannot\b", "can"), (r"n't\b", "")]
_ENTITY_SWAPS = {
    "TNG eWallet": "Boost",
    "Visa": "American Express",
    "Mastercard": "UnionPay",
    "DuitNow": "JomPAY",
    "FCA": "SEC",
    "NSRC": "PDRM",
    "MyJPJ": "MySejahtera",
    "Consumer Duty": "Banking Code",
    "e-Mas": "e-Perak",
    "Partner Bank": "Maybank",
    "Zakat": "Wakaf",
}


def _cite_each(text: str, n: int) -> str:
    lines = []
    for line in text.splitlines():
        sentences = split_sentences(line.strip())
        lines.append(" ".join(f"{s.rstrip('.')} [{n}]." if s else s for s in sentences))
    return "\n".join(lines)


def _paraphrases(text: str, n: int) -> Iterator[tuple[str, str]]:
    text = text.strip()
    yield "as_is", f"{text} [{n}]"
    yield "cited_per_sentence", _cite_each(text, n)
    yield "filler_prefix", f"Based on the provided sources, {text[0].lower()}{text[1:]} [{n}]"
    sentences = [s for line in text.splitlines() for s in split_sentences(line.strip()) if s]
    if len(sentences) > 1 and not sentences[0].endswith(":"):  # a lead-in alone says nothing
        yield "first_sentence", f"{sentences[0]} [{n}]"
        yield "reordered", " ".join(f"{s} [{n}]" for s in reversed(sentences))
    for family, table in (("synonyms", _SYNONYMS), ("contractions", _CONTRACTIONS)):
        changed = text
        for pattern, repl in table.items():
            changed = re.sub(pattern, repl, changed)
        if changed != text:
            yield family, f"{changed} [{n}]"


def _change_number(text: str) -> str | None:
    match = re.search(r"\d+", text)
    if not match:
        return None
    value = int(match.group(0))
    return f"{text[: match.start()]}{value * 2 + 1}{text[match.end() :]}"


def _perturbations(text: str, n: int, missing: int) -> Iterator[tuple[str, str]]:
    text = text.strip()
    first = next((s for line in text.splitlines() for s in split_sentences(line.strip()) if s), "")
    if (changed := _change_number(text)) is not None:
        yield "kb_swapped_number", f"{changed} [{n}]"
    for pattern, repl in _DE_NEGATIONS if re.search(r"\b(?:not|no|cannot)\b|n't", first) else []:
        if re.search(pattern, first):
            yield "kb_negation_flip", f"{re.sub(pattern, repl, first, count=1)} [{n}]"
            break
    else:
        for pattern, repl in _NEGATIONS:
            if re.search(pattern, first):
                yield "kb_negation_flip", f"{re.sub(pattern, repl, first, count=1)} [{n}]"
                break
    for name, other in _ENTITY_SWAPS.items():
        if name in text:
            yield "kb_wrong_entity", f"{text.replace(name, other)} [{n}]"
            break
    yield "kb_citation_to_missing_passage", f"{text} [{missing}]"


def kb_cases() -> list[Case]:
    """Cases from the shared seed data; empty when it is absent."""
    docs: list[tuple[str, str, str]] = []  # source_id, passage text, answer text
    if GUIDELINES.is_file():
        for line in GUIDELINES.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                docs.append((row["id"], row["text"], row["text"]))
    if FAQ.is_file():
        for i, row in enumerate(json.loads(FAQ.read_text(encoding="utf-8"))):
            docs.append((f"tngd-{i}", f"{row['question']}\n{row['answer']}", row["answer"]))
    cases = []
    for i, (source_id, text, answer) in enumerate(docs):
        others = [docs[(i + k * 7) % len(docs)] for k in range(1, DISTRACTORS + 1)]
        position = i % (DISTRACTORS + 1)  # the right passage is not always [1]
        given = [(s, t) for s, t, _ in others]
        given.insert(position, (source_id, text))
        passages = tuple(Passage(k + 1, s, t) for k, (s, t) in enumerate(given))
        n = position + 1
        for family, variant in _paraphrases(answer, n):
            cases.append(
                Case(f"{source_id}:{family}", f"kb_{family}", passages, variant, "supported")
            )
        for family, variant in _perturbations(answer, n, len(passages) + 1):
            cases.append(Case(f"{source_id}:{family}", family, passages, variant, "unsupported"))
    return cases


# ---------------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Outcome:
    case: Case
    supported: bool
    reason: str
    ms: float


def run(
    cases: list[Case], embedder: Embedder, min_similarity: float, min_overlap: float
) -> list[Outcome]:
    outcomes = []
    for case in cases:
        start = time.perf_counter()
        report = check_grounding(
            case.answer, case.passages, embedder, min_similarity=min_similarity,
            min_overlap=min_overlap,
        )  # fmt: skip
        ms = (time.perf_counter() - start) * 1000
        outcomes.append(Outcome(case, report.supported, report.reason, ms))
    return outcomes


def summarise(
    title: str, outcomes: list[Outcome], verbose: bool, out: Callable[[str], None]
) -> None:
    if not outcomes:
        return
    by_family: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_family[("known_gap" if o.case.known_gap else o.case.expected, o.case.family)].append(o)
    out(f"\n== {title}: {len(outcomes)} cases")
    for expected in ("unsupported", "supported", "known_gap"):
        rows = [(fam, os) for (exp, fam), os in sorted(by_family.items()) if exp == expected]
        if not rows:
            continue
        label = "passed" if expected == "supported" else "rejected"
        good_total = sum(_good(o) for _, os in rows for o in os)
        total = sum(len(os) for _, os in rows)
        note = " (documented misses, not in the targets)" if expected == "known_gap" else ""
        out(f"  {expected}: {label} {good_total}/{total} = {good_total / total:.1%}{note}")
        for fam, os in rows:
            good = sum(_good(o) for o in os)
            out(f"    {fam:34s} {good:3d}/{len(os):<3d} {good / len(os):6.1%}")
    ms = sorted(o.ms for o in outcomes)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    out(f"  latency per check: p50 {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms")
    if verbose:
        for o in outcomes:
            if not _good(o) and not o.case.known_gap:
                out(
                    f"  MISS {o.case.id} [{o.case.expected}] {o.case.answer!r}\n       -> {o.reason}"
                )


def _good(o: Outcome) -> bool:
    return o.supported == (o.case.expected == "supported")


def _rates(outcomes: list[Outcome]) -> tuple[float, float]:
    bad = [o for o in outcomes if o.case.expected == "unsupported" and not o.case.known_gap]
    ok = [o for o in outcomes if o.case.expected == "supported"]
    return (
        sum(_good(o) for o in bad) / max(1, len(bad)),
        sum(_good(o) for o in ok) / max(1, len(ok)),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-similarity", type=float, default=DEFAULT_MIN_SIMILARITY)
    parser.add_argument("--min-overlap", type=float, default=DEFAULT_MIN_OVERLAP)
    parser.add_argument("--sweep", action="store_true", help="grid over both thresholds")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every miss")
    args = parser.parse_args()

    embedder = OnnxEmbedder()
    adversarial, kb = load_adversarial(), kb_cases()
    if args.sweep:
        print("min_sim min_ovl | adversarial reject/pass | kb reject/pass")
        for sim in (0.45, 0.5, 0.55, 0.6, 0.65):
            for ovl in (0.4, 0.5, 0.6, 0.7, 0.8):
                a = _rates(run(adversarial, embedder, sim, ovl))
                k = _rates(run(kb, embedder, sim, ovl)) if kb else (float("nan"),) * 2
                print(
                    f"  {sim:.2f}  {ovl:.2f}  |  {a[0]:6.1%} {a[1]:6.1%}  |  {k[0]:6.1%} {k[1]:6.1%}"
                )
        return 0

    print(f"thresholds: min_similarity={args.min_similarity} min_overlap={args.min_overlap}")
    adv = run(adversarial, embedder, args.min_similarity, args.min_overlap)
    summarise(f"adversarial ({ADVERSARIAL.relative_to(ROOT)})", adv, args.verbose, print)
    if kb:
        summarise("real KB text (GuidelineIQ + TNGD FAQ)", run(
            kb, embedder, args.min_similarity, args.min_overlap), args.verbose, print)  # fmt: skip
    else:
        print(f"\n(no shared seed data at {SEEDS}: real-KB cases skipped)")
    reject, passed = _rates(adv)
    return 0 if reject == 1.0 and passed >= 0.95 else 1


if __name__ == "__main__":
    raise SystemExit(main())
