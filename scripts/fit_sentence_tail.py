"""Fit the learned injection classifier's sentence correction (`learned.corrected`): the scale
of the upper tail of benign sentences' log-odds, for MiniLM's model and for MPNet's reader.

    .venv/bin/python scripts/fit_sentence_tail.py [--requests alpaca_eval.json] [--dry-run]

The classifier scores a long message sentence by sentence; a sentence's log-odds are lowered
by `tail * ln(n)` for a message of n sentences, so a long message is not flagged for one of
its many benign sentences crossing the threshold by chance. `tail` is the mean excess of
benign sentences' log-odds over their 90th percentile: the scale of an exponential tail
fitted by peaks over a threshold, which is what the correction assumes.

Benign sentences: every sentence of every visible benign text of more than one sentence
(`guard_curve.visible_sets`' benign sets: deepset's English train split, XSTest safe, our
red-team benign, customer-wording and benign-request rows, each `--requests` file) and of
the real questions of `guard_curve.question_sets` (our golden sets and FAQs, TNGD,
GuidelineIQ, the shared FAQ sets' entries and queries), **covidfaq excepted** (held out:
a check, never a tuning set; NG12's questions are never read). MiniLM's tail is fitted on
all of them; MPNet's on the sentences of the messages it reads (MiniLM's highest score at or
above the band), the only ones it is asked about. The rules are not run: a benign row they
refuse is still a benign sentence. Writes `sentence_tail` into both models' `about`
(`injection_model.npz`, `injection_reader.npz`; their weights are unchanged), unless
`--dry-run`. Prints the fit at other percentiles and with each FAQ set left out.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import numpy as np  # noqa: E402
from guard_curve import question_sets, visible_sets  # noqa: E402

from guardrag.config.settings import Settings  # noqa: E402
from guardrag.core.guards.input.semantic import default_embedder  # noqa: E402
from guardrag.core.guards.shared.learned import (  # noqa: E402
    _ASKS_FOR_ADVICE,
    INJECTION_MODEL,
    INJECTION_READER,
    LinearModel,
    sentences,
)
from guardrag.core.guards.shared.normalize import normalize  # noqa: E402
from guardrag.core.mpnet import installed_mpnet  # noqa: E402

HELD_OUT = ("covidfaq", "ng12")
QUANTILE = 0.9


def benign_texts(requests: list[Path]) -> dict[str, list[str]]:
    """set name -> its benign texts (held-out sets and deepset's test split left out)."""
    sets = {
        name: texts
        for name, (attack, texts) in visible_sets(requests).items()
        if not attack and " test " not in name
    }
    sets.update(
        {
            f"Q {name}": texts
            for name, texts in question_sets().items()
            if not any(h in name.lower() for h in HELD_OUT)
        }
    )
    return sets


def log_odds(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


def score_sets(
    sets: dict[str, list[str]], minilm: LinearModel, reader: LinearModel
) -> dict[str, tuple[list[float], list[float]]]:
    """set name -> (MiniLM log-odds of every sentence, MPNet log-odds of the sentences of
    the messages MiniLM sends to it); a text in two sets counts in the first."""
    embedder = default_embedder()
    encoder, problem = installed_mpnet(Settings())
    if encoder is None:
        sys.exit(f"MPNet is not installed (make llm): {problem}")
    band, seen = float(reader.about["band"]), set()
    out: dict[str, tuple[list[float], list[float]]] = {}
    for name, texts in sets.items():
        messages = []
        for text in dict.fromkeys(texts):
            norm = normalize(text)
            scored = norm.respelled or norm.text
            parts = sentences(scored)
            if parts and text not in seen and not _ASKS_FOR_ADVICE.match(scored):
                messages.append((scored, parts))
            seen.add(text)
        first, second = [], []
        for scored, parts in messages:
            vectors = embedder.embed([scored, *parts])
            own = [minilm.probability(v, t) for v, t in zip(vectors, [scored, *parts], strict=True)]
            first += [log_odds(p) for p in own[1:]]
            if max(own) >= band:
                read = encoder.embed(parts)
                second += [
                    log_odds(reader.probability(v, t)) for v, t in zip(read, parts, strict=True)
                ]
        out[name] = (first, second)
        print(
            f"  {name:<42} messages {len(messages):>4} sentences {len(first):>5} read {len(second)}"
        )
    return out


def tail(values: list[float], quantile: float = QUANTILE) -> float:
    """Mean excess over the `quantile` of the log-odds: an exponential tail's scale."""
    x = np.asarray(values)
    edge = float(np.quantile(x, quantile))
    return float((x[x > edge] - edge).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=Path, action="append", default=[])
    parser.add_argument("--dry-run", action="store_true", help="report, write nothing")
    args = parser.parse_args()
    minilm, reader = LinearModel.load(INJECTION_MODEL), LinearModel.load(INJECTION_READER)
    scored = score_sets(benign_texts(args.requests), minilm, reader)
    fitted = {}
    for label, path, model, which in (
        ("MiniLM", INJECTION_MODEL, minilm, 0),
        ("MPNet reader", INJECTION_READER, reader, 1),
    ):
        values = [x for pair in scored.values() for x in pair[which]]
        fitted[path] = round(tail(values), 3)
        grid = ", ".join(f"q{q:.2f} {tail(values, q):.3f}" for q in (0.8, 0.9, 0.95, 0.98))
        print(f"{label}: {len(values)} sentences, tail {fitted[path]} ({grid})")
        for name in scored:
            if name.startswith("Q ") and not name.startswith(("Q golden", "Q faq ")):
                rest = [x for other, pair in scored.items() if other != name for x in pair[which]]
                print(f"  without {name}: tail {tail(rest):.3f} over {len(rest)} sentences")
        cut = model.threshold
        raised = [
            1 / (1 + math.exp(-(log_odds(cut) + fitted[path] * math.log(n)))) for n in (2, 4, 8)
        ]
        print(
            f"  a sentence's cut-off at threshold {cut:.2f}: n=2 {raised[0]:.2f}, "
            f"n=4 {raised[1]:.2f}, n=8 {raised[2]:.2f}"
        )
    if args.dry_run:
        return
    for path, value in fitted.items():
        model = LinearModel.load(path)
        about = {**model.about, "sentence_tail": value, "sentence_tail_quantile": QUANTILE}
        LinearModel(
            model.dense,
            model.vocab,
            model.sparse,
            model.bias,
            model.ngram_weight,
            model.threshold,
            about,
        ).save(path)
        print(f"wrote sentence_tail {value} into {path.name}")


if __name__ == "__main__":
    main()
