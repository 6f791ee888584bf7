"""Fit the learned guards and write their weights next to `guardrag/core/guards/shared/learned.py`.

    .venv/bin/python scripts/fit_guards.py            # fit all three, report, write the .npz files
    .venv/bin/python scripts/fit_guards.py --passage  # only the passage model (reads the
                                                      # passage screen's instruction classifier)
    .venv/bin/python scripts/fit_guards.py --dry-run  # fit and report only
    .venv/bin/python scripts/fit_guards.py --requests alpaca_eval.json  # + benign requests

Then `scripts/fit_sentence_tail.py` (same `--requests`): the per-sentence correction's tail,
written into the same two injection files (a refit here writes them without it).

`--requests FILE` (repeatable) adds public instruction-following data as benign requests: a
JSON list or JSON lines of objects with `instruction` or `text` (AlpacaEval's
`results/<model>/model_outputs.json` from github.com/tatsu-lab/alpaca_eval reads as is; its data
is CC BY-NC 4.0, so it is read from where you put it and never copied into the project).

The injection classifier (input guard) is fit on the TRAIN split of deepset/prompt-injections
(../shared/data, or GUARDRAG_SHARED_DATA) and on our own data:
  injections: deepset train label 1; red-team attacks of the injection families
              (datasets/redteam); the injection exemplars of config/exemplars/attacks.py
  benign:     deepset train label 0; our FAQ questions (e-wallet, telco) and golden questions
              (e-wallet, telco, gym, courier, insurance documents), TNGD's and GuidelineIQ's
              questions (tuning seeds: the compliance team's wording), red-team benign and
              customer-wording questions; benign exemplars; greetings and off-topic requests
              (config/exemplars/domain.py: those belong to the domain gate); benign requests:
              writing, summarising, role-play for a story and role-framed real questions
              (datasets/redteam/benign_requests.jsonl) and the `--requests` files (a request
              the bot does not serve is out of domain, not an attack on it); and the sentences
              of every benign message longer than one (the detector scores them alone too)
Every choice is made on 5-fold out-of-fold scores of that data: the threshold is the lowest
with <= 1% of English deepset benign rows, <= 0.5% of our customer questions and <= 1% of
the benign requests flagged;
among (l2, n-gram weight) the best out-of-fold recall on English injections wins (ties: the
stronger l2). The TEST split is scored once, after the choice, and only reported.

The second reader is the same kind of model over all-mpnet-base-v2 vectors (installed by
`make llm`), on the same examples and folds, with a band: a message whose MiniLM score is at or
above the band is flagged when MPNet's score reaches its threshold, and passes otherwise. The
threshold is the lowest within the same caps, counted over what the two decide together; among
(l2, n-gram weight, band) the best out-of-fold English recall wins (ties: the stronger l2, then
the higher band, which asks MPNet less often).
`--cache DIR` keeps the embeddings and out-of-fold scores there (outside the repo).

The passage screen reads its own instruction classifier (`guards/ingest/passage_injection.npz`): the
injection classifier as fit before benign requests were negatives (this script without
`--requests`, its `injection_model.npz` renamed), because in a KB passage any instruction to a
reader or a model is foreign. A run with `--requests` refits the input guard only and leaves
the passage screen as it is; without it, the fit also replaces the passage screen's classifier.

The passage model (`guards/ingest/foreign.py`: does a sentence belong in its KB entry?) is fit on
clean KBs: every sentence of our e-wallet, telco, gym and courier FAQs and insurance documents,
and of the public TNGD and GuidelineIQ seeds (covidfaq stays held out), against sentences planted
into their entries at the start, middle or end: the instruction and attack exemplars
(config/exemplars/attacks.py, each left out of its own similarity feature), the red-team
attacks and the deepset train split's injections. The score is instruction similarity minus
relevance to the entry, plus a grid of weights (KB topic, first person, injection
probability, request, errand novelty); the weights kept are those whose threshold taken from
the other KBs flags no clean sentence of the KB left out, with the best catch; the threshold
sits just above every clean sentence. For the novelty feature each clean KB is also read as
parts of itself (SUBSAMPLES: random entries, and runs of consecutive entries, a small KB of one
topic): a small KB uses fewer words, so its own help text looks more novel. The public indirect-injection
payloads are never used here (scripts/poison_eval.py plants them).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from _guard_data import Example, jsonl, report_families, shared, training_data  # noqa: E402
from poison_eval import POSITIONS, plant  # noqa: E402

from guardrag.config.exemplars.attacks import ATTACKS, FOREIGN  # noqa: E402
from guardrag.config.settings import Settings  # noqa: E402
from guardrag.core.embedder import Encoder, load_embedder  # noqa: E402
from guardrag.core.guards.ingest.foreign import (  # noqa: E402
    FEATURES,
    NOVELTY,
    PASSAGE_INJECTION,
    PASSAGE_MODEL,
    ForeignSentences,
    PassageModel,
    split_sentences,
    units,
    vocabulary,
)
from guardrag.core.guards.shared.learned import (  # noqa: E402
    INJECTION_MODEL,
    INJECTION_READER,
    LearnedInjection,
    LinearModel,
    build_vocab,
    design,
    fit_logistic,
    model_from_weights,
    sentences,
)
from guardrag.core.kb.readers import load_entries  # noqa: E402
from guardrag.core.mpnet import MPNET, installed_mpnet  # noqa: E402

GRID_L2 = (0.1, 0.3, 1.0)
GRID_NGRAM = (0.5, 1.0)
#: MiniLM scores from which the second reader (MPNet) decides.
GRID_BAND = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
MIN_DF = 3
FOLDS = 5
MAX_FP_OFFTOPIC = 0.01
MAX_FP_CUSTOMER = 0.005
MAX_FP_REQUESTS = 0.01


class Scorer:
    """Embeddings computed once per text (whole texts and their sentences)."""

    def __init__(self, embedder: Encoder | None = None, store: Path | None = None) -> None:
        self.embedder = embedder or load_embedder()
        self.cache: dict[str, np.ndarray] = {}
        self.store = store  # a file of earlier runs' vectors (--cache), kept outside the repo
        if store is not None and store.exists():
            with np.load(store, allow_pickle=True) as saved:  # our own file
                self.cache = dict(zip(saved["texts"].tolist(), saved["vectors"], strict=True))

    def vectors(self, texts: list[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self.cache})
        for start in range(0, len(todo), 256):  # saved as it goes: a stopped run resumes
            chunk = todo[start : start + 256]
            for text, vector in zip(chunk, self.embedder.embed(chunk), strict=True):
                self.cache[text] = vector
            if self.store is not None:
                keys = list(self.cache)
                vectors = np.stack([self.cache[k] for k in keys])
                np.savez(self.store, texts=np.array(keys, dtype=object), vectors=vectors)
        return np.stack([self.cache[t] for t in texts])

    def fit(self, texts: list[str], labels: np.ndarray, l2: float, weight: float) -> LinearModel:
        vocab = build_vocab(texts, MIN_DF)
        beta = fit_logistic(design(self.vectors(texts), texts, vocab, weight), labels, l2)
        return model_from_weights(beta, vocab, weight, 0.5, {})

    def score(self, model: LinearModel, texts: list[str]) -> np.ndarray:
        """As LearnedInjection scores: the whole text, then each sentence; the maximum."""
        whole = self.vectors(texts)
        out = np.array([model.probability(v, t) for v, t in zip(whole, texts, strict=True)])
        for i, text in enumerate(texts):
            parts = sentences(text)
            if parts:
                vs = self.vectors(parts)
                out[i] = max(
                    out[i], *(model.probability(v, p) for v, p in zip(vs, parts, strict=True))
                )
        return out


class Folds:
    """The training examples, 5 folds that keep a message with its sentences, and the
    out-of-fold scores of a model fit on the other folds."""

    def __init__(self, train: list[Example]) -> None:
        self.train = train
        self.texts = [e.text for e in train]
        self.labels = np.array([e.label for e in train], dtype=np.float64)
        sources = list(dict.fromkeys(e.source for e in train))
        draw = np.random.default_rng(0).permutation(sources)
        fold_of = {s: i % FOLDS for i, s in enumerate(draw)}
        self.folds = [np.flatnonzero([fold_of[e.source] == f for e in train]) for f in range(FOLDS)]
        self.en_pos = np.array([e.label == 1 and e.lang == "en" for e in train])

    def oof(self, scorer: Scorer, l2: float, weight: float) -> np.ndarray:
        """Out-of-fold scores (kept next to the scorer's --cache file, keyed by the examples,
        labels, folds and setting)."""
        key = hashlib.sha256(f"{l2} {weight} {self.labels.tolist()}".encode())
        key.update(b"".join(f.tobytes() for f in self.folds) + "\x00".join(self.texts).encode())
        saved = scorer.store and scorer.store.with_name(
            f"{scorer.store.stem}-oof-{key.hexdigest()[:16]}.npy"
        )
        if saved and saved.exists():
            return np.load(saved)
        out = np.zeros(len(self.train))
        for fold in self.folds:
            keep = np.ones(len(self.train), dtype=bool)
            keep[fold] = False
            model = scorer.fit(
                [self.texts[i] for i in np.flatnonzero(keep)], self.labels[keep], l2, weight
            )
            out[fold] = scorer.score(model, [self.texts[i] for i in fold])
        if saved:
            np.save(saved, out)
        return out

    def recall(self, flagged: np.ndarray) -> float:
        return float(np.mean(flagged[self.en_pos]))

    def final(
        self, scorer: Scorer, l2: float, weight: float, threshold: float, about: dict[str, object]
    ) -> LinearModel:
        fit = scorer.fit(self.texts, self.labels, l2, weight)
        digest = hashlib.sha256(
            "\x00".join(f"{e.label}{e.text}" for e in self.train).encode()
        ).hexdigest()
        about = {
            "fit": "scripts/fit_guards.py",
            "train_examples": len(self.train),
            "train_digest": digest[:16],
            "l2": l2,
            "ngram_weight": weight,
            "caps": {
                "offtopic_en": MAX_FP_OFFTOPIC,
                "customer": MAX_FP_CUSTOMER,
                "requests": MAX_FP_REQUESTS,
            },
            **about,
        }
        beta = np.concatenate([fit.dense, fit.sparse, [fit.bias]])
        return model_from_weights(beta, fit.vocab, weight, threshold, about)


def choose_threshold(scores: np.ndarray, train: list[Example]) -> float | None:
    """The lowest threshold within both false-positive caps, counted over whole messages (a
    benign message's sentences train the model but are not messages of their own)."""
    whole = np.array([e.source == e.text for e in train])
    offtopic = whole & np.array(
        [e.label == 0 and e.group == "offtopic" and e.lang == "en" for e in train]
    )
    customer = whole & np.array([e.group == "customer" for e in train])
    requests = whole & np.array([e.group == "requests" for e in train])
    for threshold in np.round(np.arange(0.05, 0.995, 0.01), 2):
        if (
            np.mean(scores[offtopic] >= threshold) <= MAX_FP_OFFTOPIC
            and np.mean(scores[customer] >= threshold) <= MAX_FP_CUSTOMER
            and (not requests.any() or np.mean(scores[requests] >= threshold) <= MAX_FP_REQUESTS)
        ):
            return float(threshold)
    return None


def fit_injection(
    scorer: Scorer, data: Folds, grid: list[tuple[float, float]]
) -> tuple[LinearModel, np.ndarray]:
    """MiniLM's classifier, and its out-of-fold scores (the second reader's band reads them)."""
    best: tuple[float, float, float, float] | None = None  # recall, l2, n-gram weight, threshold
    scores: dict[tuple[float, float], np.ndarray] = {}
    for l2, weight in grid:
        oof = scores[l2, weight] = data.oof(scorer, l2, weight)
        threshold = choose_threshold(oof, data.train)
        if threshold is None:
            print(f"  l2 {l2} ngram {weight}: no threshold meets the false-positive caps")
            continue
        recall = data.recall(oof >= threshold)
        print(
            f"  l2 {l2} ngram {weight}: threshold {threshold:.2f}, OOF English recall {recall:.3f}"
        )
        if best is None or (recall, l2) > best[:2]:  # ties: the stronger l2
            best = (recall, l2, weight, threshold)
    if best is None:
        sys.exit("no configuration meets the false-positive caps")
    recall, l2, weight, threshold = best
    print(f"  out of fold per family, l2 {l2} ngram {weight} threshold {threshold:.2f}:")
    report_families(data.train, scores[l2, weight] >= threshold)
    model = data.final(scorer, l2, weight, threshold, {"oof_english_recall": round(recall, 4)})
    return model, scores[l2, weight]


def fit_reader(
    reader: Scorer,
    data: Folds,
    first: LinearModel,
    first_oof: np.ndarray,
    grid: list[tuple[float, float]],
) -> LinearModel:
    """MPNet's classifier and the band of MiniLM scores it decides: a message below the band
    passes, one at or above it is flagged when MPNet's score reaches the threshold. Chosen
    like MiniLM's: the best out-of-fold English recall under the same caps (ties: the stronger
    l2, then the higher band, which asks MPNet less often)."""
    best: tuple[float, float, float, float, float] | None = None
    flags: dict[tuple[float, float, float], np.ndarray] = {}
    for l2, weight in grid:
        oof = data.oof(reader, l2, weight)
        for band in (b for b in GRID_BAND if b < first.threshold):
            asked = first_oof >= band
            threshold = choose_threshold(np.where(asked, oof, 0.0), data.train)
            if threshold is None:
                continue
            flagged = flags[l2, weight, band] = asked & (oof >= threshold)
            recall = data.recall(flagged)
            print(
                f"  l2 {l2} ngram {weight} band {band}: threshold {threshold:.2f}, "
                f"OOF English recall {recall:.3f}"
            )
            if best is None or (recall, l2, band) > best[:3]:
                best = (recall, l2, band, weight, threshold)
    if best is None:
        sys.exit("no second-reader configuration meets the false-positive caps")
    recall, l2, band, weight, threshold = best
    print(f"  out of fold per family, MiniLM then MPNet, l2 {l2} ngram {weight} band {band}:")
    report_families(data.train, flags[l2, weight, band])
    about = {"oof_english_recall": round(recall, 4), "band": band, "encoder": MPNET.name}
    return data.final(reader, l2, weight, threshold, about)


def report_test(
    scorer: Scorer, model: LinearModel, test: list[Example], second: tuple[Scorer, LinearModel]
) -> None:
    """The held-out split, the classifier alone (scripts/score_guards.py scores the guard):
    MiniLM alone, then with the second reader."""
    texts = [e.text for e in test]
    first = scorer.score(model, texts)
    reader, reader_model = second
    band = float(reader_model.about["band"])
    both = (first >= band) & (reader.score(reader_model, texts) >= reader_model.threshold)
    for name, flagged in (("MiniLM alone", first >= model.threshold), ("with MPNet", both)):
        for lang in ("en", "de"):
            pos = [f for f, e in zip(flagged, test, strict=True) if e.lang == lang and e.label]
            neg = [f for f, e in zip(flagged, test, strict=True) if e.lang == lang and not e.label]
            print(
                f"  test {lang}, {name}: recall {sum(pos)}/{len(pos)}, "
                f"false positives {sum(neg)}/{len(neg)}"
            )


#: Weight grid of the passage score (instruction - relevance + these terms), and the margin
#: above the highest clean sentence.
GRID_KB = (0.0, 0.25, 0.5)
GRID_FIRST_PERSON = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
GRID_INJECTION = (0.0, 0.1, 0.2, 0.3, 0.4)
GRID_REQUEST = (0.0, 0.1, 0.2, 0.3)
GRID_NOVELTY = (0.0, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3)
PASSAGE_MARGIN = 0.03
#: Clean KBs are also scored as parts of themselves of these shares: random entries, and runs
#: of consecutive entries (a file keeps a topic together: a small KB of one topic).
SUBSAMPLES = (0.5, 0.25)


def our_kbs() -> dict[str, list[tuple[str, str]]]:
    """Clean KBs: ours (e-wallet, telco, gym, courier FAQs, insurance documents) and the public seeds
    TNGD and GuidelineIQ (../shared/data/seeds; covidfaq stays held out)."""
    data = REPO / "datasets"
    sources = {name: [data / name / "faq.jsonl"] for name in ("ewallet", "telco", "gym", "courier")}
    sources["insurance_docs"] = sorted((data / "insurance_docs" / "documents").glob("*.md"))
    sources["tngd"] = [shared() / "seeds" / "tngd-faq" / "sample.json"]
    sources["guideline_iq"] = [shared() / "seeds" / "guideline-iq" / "finance_guidelines.jsonl"]
    missing = [str(p) for paths in sources.values() for p in paths if not p.exists()]
    if missing:
        sys.exit(f"the passage fit needs {', '.join(missing)}")
    return {
        name: [(e.title, e.text) for e in load_entries(paths)[0]] for name, paths in sources.items()
    }


def passage_units() -> list[str]:
    """What does not belong in a help-centre entry: our instruction exemplars, every attack
    exemplar and red-team attack, and the deepset train split's injections (up to 40 words)."""
    units = [*FOREIGN, *(t for _, texts in ATTACKS.values() for t in texts)]
    units += [str(r["text"]) for r in jsonl(REPO / "datasets" / "redteam" / "attacks.jsonl")]
    deepset = shared() / "adversarial" / "deepset_prompt_injections" / "labelled.jsonl"
    units += [
        str(r["text"])
        for r in jsonl(deepset)
        if r["split"] == "train" and r["label"] == 1 and len(str(r["text"]).split()) <= 40
    ]
    return list(dict.fromkeys(units))


def parts_of(size: int, draw: np.random.Generator) -> list[list[int]]:
    """The whole KB's entry indices, random parts of it and runs of consecutive entries."""
    parts = [list(range(size))]
    for share in SUBSAMPLES:
        part = max(4, round(size * share))
        parts.append(sorted(int(i) for i in draw.choice(size, part, replace=False)))
        parts += [list(range(i, min(i + part, size))) for i in range(0, size, part)]
    return parts


def fit_passage(injection: LinearModel, verbose: bool = False) -> PassageModel:
    embedder = load_embedder()
    detector = ForeignSentences(
        embedder,
        PassageModel(np.zeros(len(FEATURES)), 1.0, {}),
        LearnedInjection(embedder, injection),
    )
    kbs = our_kbs()
    rows, labels, groups = _clean_sentences(detector, kbs)
    _add_planted_sentences(detector, kbs, rows, labels, groups)
    x, y, g = np.array(rows), np.array(labels), np.array(groups)
    print(f"  {int((y == 0).sum())} clean sentences, {int(y.sum())} planted, {len(kbs)} KBs")
    recall, weights = _leave_one_kb_out(x, y, g, sorted(kbs), verbose)
    score = x @ weights
    threshold = float(score[y == 0].max()) + PASSAGE_MARGIN
    about = {
        "fit": "scripts/fit_guards.py",
        "clean_sentences": int((y == 0).sum()),
        "planted_sentences": int(y.sum()),
        "leave_one_kb_out_caught": round(recall, 4),
        "in_sample_caught": round(float(np.mean(score[y == 1] >= threshold)), 4),
        "margin": PASSAGE_MARGIN,
        "subsamples": list(SUBSAMPLES),
        "weights": {f: float(w) for f, w in zip(FEATURES, weights, strict=True)},
    }
    print(f"  chosen {about}, threshold {threshold:.3f}")
    return PassageModel(weights, threshold, about)


def _clean_sentences(
    detector: ForeignSentences, kbs: dict[str, list[tuple[str, str]]]
) -> tuple[list[np.ndarray], list[int], list[str]]:
    """Every sentence of our KBs (label 0) with its features and its KB, the novelty feature
    measured against a random part of its KB (as a KB of that size would be)."""
    rows: list[np.ndarray] = []
    labels: list[int] = []
    groups: list[str] = []
    draw = np.random.default_rng(1)
    for name, entries in kbs.items():
        scored = detector.features(entries, [t for t, _ in entries])
        for part in parts_of(len(entries), draw):
            # the part's words for the novelty feature; meaning (cosines) from the whole KB
            words = vocabulary([entries[i] for i in part])
            for i in part:
                (title, text), (sentences, features) = entries[i], scored[i]
                own = words.own(title, units(text))
                features = features.copy()
                features[:, NOVELTY] = [words.novelty(x, own).value for x in sentences]
                rows += list(features)
                labels += [0] * len(features)
                groups += [name] * len(features)
    return rows, labels, groups


def _add_planted_sentences(
    detector: ForeignSentences,
    kbs: dict[str, list[tuple[str, str]]],
    rows: list[np.ndarray],
    labels: list[int],
    groups: list[str],
) -> None:
    """Injection passages planted at each position of random entries: their sentences (label
    1) added with their features and KB."""
    rng = np.random.default_rng(0)
    names = sorted(kbs)
    planted: dict[str, list[tuple[tuple[str, str], set[str]]]] = {n: [] for n in names}
    for unit in passage_units():
        for position in POSITIONS:
            name = names[rng.integers(len(names))]
            title, text = kbs[name][rng.integers(len(kbs[name]))]
            planted[name].append(((title, plant(text, unit, position)), set(split_sentences(unit))))
    for name, items in planted.items():
        titles = [t for t, _ in kbs[name]]
        # novelty against the clean KB's words: a planted entry stands in for its original
        results = detector.features(
            [entry for entry, _ in items],
            titles,
            skip_exemplar=True,
            words=vocabulary(kbs[name]),
        )
        for (_, mine), (parts, features) in zip(items, results, strict=True):
            for sentence, row in zip(parts, features, strict=True):
                if sentence in mine:
                    rows.append(row)
                    labels.append(1)
                    groups.append(name)


def _leave_one_kb_out(
    x: np.ndarray, y: np.ndarray, g: np.ndarray, names: list[str], verbose: bool
) -> tuple[float, np.ndarray]:
    """The grid's weights that catch the most planted sentences with no false positive on any
    KB, each KB judged with the threshold from the others: (mean share caught, weights)."""
    best: tuple[float, np.ndarray] | None = None
    without_novelty = 0.0
    grid = itertools.product(GRID_KB, GRID_FIRST_PERSON, GRID_INJECTION, GRID_REQUEST, GRID_NOVELTY)
    for w_kb, w_first, w_inj, w_req, w_new in grid:
        weights = np.array([w_inj, 1.0, -1.0, -w_kb, w_first, w_req, w_new])
        score = x @ weights
        false_pos, caught = 0, []
        for name in names:  # threshold from the other KBs, judged on this one
            threshold = float(score[(g != name) & (y == 0)].max()) + PASSAGE_MARGIN
            false_pos += int(np.sum((g == name) & (y == 0) & (score >= threshold)))
            caught.append(float(np.mean(score[(g == name) & (y == 1)] >= threshold)))
        if verbose:
            print(
                f"  kb {w_kb} first-person {w_first} injection {w_inj} request {w_req} "
                f"novelty {w_new}: leave-one-KB-out false positives {false_pos}, "
                f"caught {np.mean(caught):.3f}"
            )
        if false_pos == 0 and (best is None or np.mean(caught) > best[0]):
            best = (float(np.mean(caught)), weights)
        if false_pos == 0 and w_new == 0.0:
            without_novelty = max(without_novelty, float(np.mean(caught)))
    if best is None:
        sys.exit("no passage weights keep every held-out KB clean")
    print(f"  best leave-one-KB-out catch without the novelty feature: {without_novelty:.4f}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="report, write nothing")
    parser.add_argument("--passage", action="store_true", help="only the passage model")
    parser.add_argument("--verbose", action="store_true", help="every passage weight tried")
    parser.add_argument(
        "--requests",
        type=Path,
        action="append",
        default=[],
        help="JSON / JSON lines of benign requests (instruction or text), e.g. AlpacaEval's",
    )
    parser.add_argument("--no-passage", action="store_true", help="skip the passage model")
    parser.add_argument(
        "--cache", type=Path, help="a folder for the embeddings (reused by the next run)"
    )
    parser.add_argument(
        "--shipped-grid",
        action="store_true",
        help="only the shipped models' (l2, n-gram weight): one setting instead of the grid",
    )
    args = parser.parse_args()
    missing = [str(p) for p in args.requests if not p.is_file()]
    if missing:
        sys.exit(f"--requests: no such file: {', '.join(missing)}")
    if args.passage:
        injection = LinearModel.load(PASSAGE_INJECTION)
    else:
        train, test = training_data(args.requests)
        if args.cache:
            args.cache.mkdir(parents=True, exist_ok=True)
        data = Folds(train)
        scorer = Scorer(store=args.cache / "minilm.npz" if args.cache else None)
        grid = list(itertools.product(GRID_L2, GRID_NGRAM))
        if args.shipped_grid:
            shipped = LinearModel.load(INJECTION_MODEL).about
            grid = [(float(shipped["l2"]), float(shipped["ngram_weight"]))]
        print("== injection classifier, MiniLM (5-fold grid on the train split and our data)")
        injection, first_oof = fit_injection(scorer, data, grid)
        print(f"  chosen: {injection.about}, threshold {injection.threshold:.2f}")
        encoder, problem = installed_mpnet(Settings())
        if encoder is None:
            sys.exit(f"the second reader needs all-mpnet-base-v2 (make llm): {problem}")
        print("== its second reader, MPNet (the same folds; a band of MiniLM scores it decides)")
        mpnet = Scorer(encoder, args.cache / "mpnet.npz" if args.cache else None)
        reader = fit_reader(mpnet, data, injection, first_oof, grid)
        print(f"  chosen: {reader.about}, threshold {reader.threshold:.2f}")
        report_test(scorer, injection, test, (mpnet, reader))
        if not args.dry_run:
            print(f"  wrote {injection.save(INJECTION_MODEL)}")
            print(f"  wrote {reader.save(INJECTION_READER)}")
    if args.no_passage or args.requests:
        return  # benign requests belong to the input guard, not to the passage screen
    if not args.passage and not args.dry_run:
        print(f"  wrote {injection.save(PASSAGE_INJECTION)}")
    print("== passage model (leave-one-KB-out on our KBs, planted sentences)")
    passage = fit_passage(injection, args.verbose)
    if not args.dry_run:
        print(f"  wrote {passage.save(PASSAGE_MODEL)}")


if __name__ == "__main__":
    main()
