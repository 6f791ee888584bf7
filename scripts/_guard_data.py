"""The examples the learned guards are fitted on: deepset's split, our red-team and exemplar
attacks, customer wording from our golden sets and the public seeds, and benign requests the
bot does not serve (ours, and any --requests file). Shared by fit_guards.py and guard_curve.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from guardrag.config.exemplars.attacks import ATTACKS, BENIGN  # noqa: E402
from guardrag.config.exemplars.domain import GREETINGS, OFF_TOPIC  # noqa: E402
from guardrag.core.guards.shared.learned import sentences  # noqa: E402

INJECTION_FAMILIES = {
    "direct_injection",
    "prompt_extraction",
    "roleplay_jailbreak",
    "delimiter_tokens",
    "obfuscation",
}
EXEMPLAR_FAMILIES = {"override", "prompt_extraction", "jailbreak"}


def shared() -> Path:
    return Path(os.environ.get("GUARDRAG_SHARED_DATA") or REPO.parent / "shared" / "data")


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


class Example:
    """One training message (or a sentence of one): `group` is what a false-positive cap
    counts it under, `family` where it came from (the per-family report)."""

    __slots__ = ("family", "group", "label", "lang", "source", "text")

    def __init__(
        self,
        text: str,
        label: int,
        group: str,
        lang: str = "en",
        source: str = "",
        family: str = "",
    ) -> None:
        self.text, self.label, self.group, self.lang = text, label, group, lang
        self.source = source or text  # the message a sentence was taken from (same fold)
        self.family = family or group


def read_requests(path: Path) -> list[str]:
    """The instructions of a JSON list or JSON-lines file (`instruction` or `text` fields)."""
    raw = path.read_text(encoding="utf-8").strip()
    try:
        items = (
            json.loads(raw)
            if raw.startswith("[")
            else [json.loads(x) for x in raw.splitlines() if x.strip()]
        )
    except json.JSONDecodeError as exc:
        sys.exit(f"{path}: not JSON or JSON lines ({exc})")
    texts = [str(i.get("instruction") or i.get("text") or "") for i in items if isinstance(i, dict)]
    texts = [t for t in dict.fromkeys(texts) if t.strip()]
    if not texts:
        sys.exit(f"{path}: no objects with an `instruction` or `text` field")
    return texts


def benign_requests(extra: list[Path]) -> list[Example]:
    """Requests the bot does not serve, as benign examples: ours by family, and each
    `--requests` file as a family named after it."""
    ours = jsonl(REPO / "datasets" / "redteam" / "benign_requests.jsonl")
    out = [Example(str(r["text"]), 0, "requests", family=f"requests:{r['family']}") for r in ours]
    for path in extra:
        out += [
            Example(t, 0, "requests", family=f"requests:{path.stem}") for t in read_requests(path)
        ]
    return out


def training_data(requests: list[Path] | None = None) -> tuple[list[Example], list[Example]]:
    """(train, held-out deepset test) examples; `requests`: files of benign requests."""
    deepset = shared() / "adversarial" / "deepset_prompt_injections" / "labelled.jsonl"
    if not deepset.exists():
        sys.exit(f"{deepset} not found: the fit needs the deepset train split")
    train: list[Example] = []
    test: list[Example] = []
    for row in jsonl(deepset):
        lang = str(row["lang"])
        family = f"deepset:{lang if lang in ('en', 'de') else 'other'}"
        example = Example(str(row["text"]), int(row["label"]), "offtopic", lang, family=family)  # type: ignore[call-overload]
        (train if row["split"] == "train" else test).append(example)
    data = REPO / "datasets"
    for row in jsonl(data / "redteam" / "attacks.jsonl"):
        if row["family"] in INJECTION_FAMILIES:
            train.append(Example(str(row["text"]), 1, "ours", str(row["lang"]), family="redteam"))
    for family, (_, texts) in ATTACKS.items():
        if family in EXEMPLAR_FAMILIES:
            train += [Example(t, 1, "ours", family="exemplars") for t in texts]
    customer = [str(r["question"]) for r in jsonl(data / "ewallet" / "faq.jsonl")]
    customer += [str(r["question"]) for r in jsonl(data / "telco" / "faq.jsonl")]
    for name in ("ewallet", "telco", "gym", "courier", "insurance_docs"):
        customer += [
            str(r["question"])
            for r in jsonl(data / name / "golden.jsonl")
            if r["group"] != "adversarial"
        ]
    seeds = shared() / "seeds"  # the public seeds we tune on (covidfaq stays held out)
    tngd = jsonl(seeds / "tngd-faq" / "golden_set.jsonl")
    customer += [str(r["query"]) for r in tngd if r.get("group") in {"retrieval", "abstain"}]
    customer += [
        str(e["question"]) for e in json.loads((seeds / "tngd-faq" / "sample.json").read_text())
    ]
    customer += [str(r["query"]) for r in jsonl(seeds / "guideline-iq" / "golden.jsonl")]
    customer += [str(r["text"]) for r in jsonl(data / "redteam" / "benign.jsonl")]
    customer += [str(r["text"]) for r in jsonl(data / "redteam" / "customer_wording.jsonl")]
    customer += [*BENIGN, *GREETINGS, *OFF_TOPIC]
    train += [Example(t, 0, "customer") for t in customer]
    train += benign_requests(requests or [])
    # The detector also scores each sentence of a longer message alone, so the sentences of a
    # benign message are benign examples too: "You were really helpful." before a question is
    # small talk, though alone it reads like the praise that opens a stacked injection.
    return train + benign_sentences(train), test


def benign_sentences(examples: list[Example]) -> list[Example]:
    """The sentences of each benign message longer than one, as benign examples of its own
    group and fold (its `source`)."""
    return [
        Example(part, 0, e.group, e.lang, e.text, e.family)
        for e in examples
        if e.label == 0
        for part in sentences(e.text)
    ]


def report_families(train: list[Example], flagged: np.ndarray) -> None:
    """Out-of-fold flags per family, whole messages only: recall of each attack family, false
    alarms of each benign one, and the precision of all flags."""
    whole = np.array([e.source == e.text for e in train])
    labels = np.array([e.label for e in train])
    families = sorted({(e.label, e.family) for e in train}, key=lambda f: (-f[0], f[1]))
    for label, family in families:
        mine = whole & (labels == label) & np.array([e.family == family for e in train])
        n, hit = int(mine.sum()), int(flagged[mine].sum())
        what = "recall" if label else "false alarms"
        print(f"    {family:<28} {what:<12} {hit:>4}/{n:<4} ({100 * hit / max(n, 1):.1f}%)")
    tp = int((flagged & whole & (labels == 1)).sum())
    fp = int((flagged & whole & (labels == 0)).sum())
    print(f"    precision {tp}/{tp + fp} ({100 * tp / max(tp + fp, 1):.1f}%)")
