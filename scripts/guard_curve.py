"""Attack recall against benign false alarms of the input guard, as a table of thresholds of
the learned injection classifier's deciding score, on the visible sets.

    .venv/bin/python scripts/guard_curve.py [--requests alpaca_eval.json] [--rules]
    .venv/bin/python scripts/guard_curve.py --questions   # real questions refused as blocked

Every row of a set is read once by the whole input guard without its learned classifier (the
rules and the semantic detector) and once by the classifier alone (its deciding score: MPNet's
when MiniLM's score reaches the band, else MiniLM's below its own threshold counts as a pass).
A threshold `t` flags a row when the rest of the guard refuses it as an attack (kind
`blocked`; a `policy` refusal of the asker's own data is no alarm) or the deciding score
reaches `t`, so a benign row flagged is a false alarm. The shipped threshold is marked. `--rules` lists which rule refused each benign row.

Sets (`<repo>/../shared/data` or GUARDRAG_SHARED_DATA; a missing one is skipped): attacks:
deepset injections (train, in the classifier's fit, and test, held out), Giskard, XSTest
unsafe, our red-team attacks; benign: deepset benign (train, test), XSTest safe, our red-team
benign and customer-wording questions, our benign requests (datasets/redteam/
benign_requests.jsonl, in the fit) and every `--requests` file (e.g. AlpacaEval's 805
instructions, in the fit when it was given to scripts/fit_guards.py).

`--questions` instead counts the real questions the whole input guard refuses (kind
`blocked`, every one a false alarm): our golden sets (all but their adversarial rows) and FAQ
questions, TNGD's and GuidelineIQ's, and the shared FAQ sets' entries and queries (covidfaq
is held out: a check, never a tuning set).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import numpy as np  # noqa: E402
from _guard_data import read_requests  # noqa: E402
from score_guards import data_dir, load_giskard, load_xstest  # noqa: E402

from guardrag.contract import REASON_KIND  # noqa: E402
from guardrag.core.guards import InputGuard  # noqa: E402
from guardrag.core.guards.shared.learned import _ASKS_FOR_ADVICE, sentences  # noqa: E402
from guardrag.core.guards.shared.normalize import normalize  # noqa: E402

THRESHOLDS: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)
MAX_FALSE_ALARMS = 0.02


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def visible_sets(requests: list[Path]) -> dict[str, tuple[bool, list[str]]]:
    """name -> (is attack, texts)."""
    root, ours = data_dir(), REPO / "datasets" / "redteam"
    sets: dict[str, tuple[bool, list[str]]] = {}
    deepset = root / "adversarial" / "deepset_prompt_injections" / "labelled.jsonl"
    if deepset.exists():
        rows = [r for r in jsonl(deepset) if r["lang"] == "en"]
        for split in ("train", "test"):
            for label, attack in ((1, True), (0, False)):
                name = f"deepset-en {split} {'injections' if attack else 'benign'}"
                texts = [
                    str(r["text"]) for r in rows if r["split"] == split and r["label"] == label
                ]
                sets[name] = (attack, texts)
    giskard = load_giskard(root)
    if giskard:
        sets["giskard"] = (True, [r.text for r in giskard])
    xstest = load_xstest(root)
    if xstest:
        sets["xstest unsafe"] = (True, [r.text for r in xstest if r.should_block])
        sets["xstest safe"] = (False, [r.text for r in xstest if not r.should_block])
    sets["redteam attacks"] = (True, [str(r["text"]) for r in jsonl(ours / "attacks.jsonl")])
    sets["redteam benign"] = (False, [str(r["text"]) for r in jsonl(ours / "benign.jsonl")])
    wording = jsonl(ours / "customer_wording.jsonl")
    sets["customer wording"] = (False, [str(r["text"]) for r in wording])
    requests_ours = jsonl(ours / "benign_requests.jsonl")
    sets["benign requests (ours)"] = (False, [str(r["text"]) for r in requests_ours])
    for path in requests:
        sets[f"requests: {path.name}"] = (False, read_requests(path))
    return sets


def question_sets() -> dict[str, list[str]]:
    """name -> real questions that must never be refused as attacks."""
    root, data = data_dir(), REPO / "datasets"
    sets: dict[str, list[str]] = {}
    for name in ("ewallet", "telco", "gym", "courier", "insurance_docs"):
        golden = jsonl(data / name / "golden.jsonl")
        sets[f"golden {name}"] = [str(r["question"]) for r in golden if r["group"] != "adversarial"]
        if (data / name / "faq.jsonl").exists():
            sets[f"faq {name}"] = [str(r["question"]) for r in jsonl(data / name / "faq.jsonl")]
    tngd = root / "seeds" / "tngd-faq"
    if tngd.exists():
        rows = jsonl(tngd / "golden_set.jsonl")
        sets["tngd"] = [str(r["query"]) for r in rows if r.get("group") in {"retrieval", "abstain"}]
        sets["tngd"] += [str(e["question"]) for e in json.loads((tngd / "sample.json").read_text())]
    giq = root / "seeds" / "guideline-iq" / "golden.jsonl"
    if giq.exists():
        sets["guideline-iq"] = [str(r["query"]) for r in jsonl(giq)]
    for folder in sorted((root / "faq").glob("*")) if (root / "faq").exists() else []:
        for part in ("kb", "queries"):
            if (folder / f"{part}.jsonl").exists():
                rows = jsonl(folder / f"{part}.jsonl")
                sets[f"{folder.name} {part}"] = [str(r["question"]) for r in rows]
    return sets


def count_blocked(guard: InputGuard) -> None:
    """Real questions refused by the whole input guard as attacks (kind `blocked`), per set,
    with the rule; refusals of kind `policy` (the asker's own data) are counted apart."""
    for name, texts in question_sets().items():
        found = [(t, f) for t in texts if (f := guard.check(t, 100_000)) is not None]
        policy = sum(REASON_KIND[f.reason] == "policy" for _, f in found)
        print(f"  {name:<34} blocked {len(found) - policy}/{len(texts)} (policy {policy})")
        for text, f in found:
            print(f"    [{f.rule} {f.score:.2f}] {' '.join(text.split())[:110]}")


def deciding_score(guard: InputGuard, text: str, vector: np.ndarray) -> float:
    """The learned classifier's score that decides, on the normalised text (a sentence's
    corrected for how many were scored): MPNet's when MiniLM's highest reaches the band (the
    reader installed), else MiniLM's without a reader, else 0 (a pass at every threshold)."""
    learned = guard.semantic.learned if guard.semantic is not None else None
    if learned is None:
        return 0.0
    norm = normalize(text).text
    if _ASKS_FOR_ADVICE.match(norm):
        return 0.0
    if norm != text:
        vector = np.asarray(learned.embedder.embed([norm])[0], dtype=np.float32)
    text = norm
    scores = learned.scores(text, vector)
    if learned.reader is None:
        return learned.model.strongest(scores)[0]
    if max(s for s, _ in scores) < learned.reader.band:
        return 0.0
    return learned.reader.best([text, *sentences(text)])[0]


def read_sets(
    guard: InputGuard, sets: dict[str, tuple[bool, list[str]]]
) -> dict[str, list[tuple[str | None, float]]]:
    """name -> [(rule of the rest of the guard or None, deciding score)] per row."""
    out: dict[str, list[tuple[str | None, float]]] = {}
    learned = guard.semantic.learned if guard.semantic is not None else None
    if learned is None:
        sys.exit("the input guard has no learned classifier")
    # the rest of the guard: the classifier never refuses itself
    learned.detect = lambda norm, vector=None: None  # type: ignore[method-assign]
    try:
        for name, (_, texts) in sets.items():
            rows = []
            for text in texts:
                vector = np.asarray(learned.embedder.embed([text])[0], dtype=np.float32)
                found = guard.check(text, 100_000, vector=vector)
                rule = found.rule if found and REASON_KIND[found.reason] == "blocked" else None
                rows.append((rule, deciding_score(guard, text, vector)))
            out[name] = rows
    finally:
        del learned.detect
    return out


def table(
    sets: dict[str, tuple[bool, list[str]]],
    read: dict[str, list[tuple[str | None, float]]],
    shipped: float,
) -> None:
    names = list(sets)
    print("| threshold | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for t in THRESHOLDS:
        cells = []
        for name in names:
            rows = read[name]
            hit = sum(rule is not None or score >= t for rule, score in rows)
            cells.append(f"{hit}/{len(rows)} ({100 * hit / max(len(rows), 1):.1f}%)")
        label = "off" if t > 1 else f"{t:.2f}"
        mark = " (shipped)" if abs(t - shipped) < 1e-9 else ""
        print(f"| {label}{mark} | " + " | ".join(cells) + " |")
    print(
        f"\n  shipped threshold {shipped:.2f}; rows: attack sets = recall, benign sets = false alarms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=Path, action="append", default=[])
    parser.add_argument("--rules", action="store_true", help="which rule refused benign rows")
    parser.add_argument("--questions", action="store_true", help="real questions blocked")
    args = parser.parse_args()
    guard = InputGuard(via_guardrails=False)
    if args.questions:
        count_blocked(guard)
        return
    learned = guard.semantic.learned if guard.semantic is not None else None
    shipped = 1.01
    if learned is not None:
        shipped = learned.reader.model.threshold if learned.reader else learned.model.threshold
    global THRESHOLDS
    THRESHOLDS = tuple(sorted({*THRESHOLDS, round(shipped, 2)}))
    sets = visible_sets(args.requests)
    read = read_sets(guard, sets)
    table(sets, read, round(shipped, 2))
    for name, (attack, texts) in sets.items():
        rows = read[name]
        if args.rules and not attack:
            rules = Counter(rule or "learned.injection" for rule, s in rows if rule or s >= shipped)
            print(f"  {name}: {dict(rules.most_common())}")
            for text, (rule, s) in zip(texts, rows, strict=True):
                if rule or s >= shipped:
                    print(f"    [{rule or f'learned {s:.2f}'}] {' '.join(text.split())[:110]}")


if __name__ == "__main__":
    main()
