"""The int8-compute embedding experiment: build the model, run guardrag with it.

    python scripts/quantize_embedder.py build OUT.onnx [--per-tensor]
    python scripts/quantize_embedder.py run MODEL.onnx -- eval GOLDEN.jsonl --kb NAME ...
    python scripts/quantize_embedder.py compare DIR_A DIR_B ...   (pairs of `guardrag eval` --out folders)

`build` needs the `onnx` package, which guardrag does not depend on (install it apart, e.g.
`pip install --target /tmp/onnxlib onnx` and `PYTHONPATH=/tmp/onnxlib`): it lets onnxruntime
fold the shipped model's int8 weights back to float32 (what a session computes with today),
then quantizes every MatMul dynamically (int8 weights per output channel, activations
quantized per call), so the matrix products run in int8.
`run` is the `guardrag` command with the embedder loading MODEL instead of the shipped one, so
a golden set can be ingested and scored with either (use a fresh GUARDRAG_DATA_DIR for each:
vectors of two models must never meet in one KB).
`compare` prints, per pair of eval folders (baseline first), recall@1 and decision accuracy of
both and the cases whose decision changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def build(out: Path, per_channel: bool) -> None:
    import onnxruntime as ort  # lazy: only `build` and `run` need the runtime
    from onnxruntime.quantization import QuantType, quantize_dynamic  # lazy: needs `onnx`

    from guardrag.core.embedder import default_model_files  # lazy: see above

    shipped, _ = default_model_files()
    with tempfile.TemporaryDirectory() as tmp:
        folded = Path(tmp) / "fp32.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(shipped), options, providers=["CPUExecutionProvider"])
        quantize_dynamic(
            folded,
            out,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            per_channel=per_channel,
        )
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB)")


def run(model: Path, args: list[str]) -> None:
    import guardrag.core.embedder as embedder  # lazy: see build

    tokenizer = embedder.default_model_files()[1]
    embedder.default_model_files = lambda: (model, tokenizer)
    from guardrag.faces.cli.main import main  # lazy: after the model is swapped

    sys.argv = ["guardrag", *args]
    main()


def _decisions(folder: Path) -> dict[str, tuple[str, bool]]:
    """Each case's decision (outcome, refusal reason, cited entries) and whether it passed."""
    rows = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    return {
        str(r["id"]): (f"{r.get('outcome')}:{r.get('reason')}:{r.get('cited')}", bool(r.get("ok")))
        for r in rows
    }


def compare(folders: list[Path]) -> None:
    print(
        f"{'eval':<24} {'hybrid+rerank r@1':>18} {'dense r@1':>18} {'decision acc.':>18} "
        f"{'pass rate':>18} changed decisions"
    )
    for base, other in zip(folders[::2], folders[1::2], strict=True):
        a, b = (json.loads((f / "summary.json").read_text()) for f in (base, other))

        def pair(get: str, a: dict = a, b: dict = b) -> str:
            first, second = (_pick(s, get) for s in (a, b))
            return f"{first} -> {second}"

        before, after = _decisions(base), _decisions(other)
        changed = [k for k, v in after.items() if before.get(k, ("", False))[0] != v[0]]
        lost = sum(before[k][1] and not after[k][1] for k in changed if k in before)
        gained = sum(after[k][1] and not before.get(k, ("", False))[1] for k in changed)
        print(
            f"{base.name:<24} {pair('retrieval.hybrid+rerank.recall@1'):>18} "
            f"{pair('retrieval.dense.recall@1'):>18} {pair('metrics.decision_accuracy'):>18} "
            f"{pair('metrics.pass_rate'):>18} {len(changed):>5} of {len(after)} "
            f"(passing: -{lost} +{gained})"
        )


def _pick(summary: dict, path: str) -> str:
    node: object = summary
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return f"{node:.4f}" if isinstance(node, float) else str(node)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build")
    make.add_argument("out", type=Path)
    make.add_argument("--per-tensor", action="store_true", help="one scale per weight matrix")
    use = sub.add_parser("run")
    use.add_argument("model", type=Path)
    use.add_argument("args", nargs=argparse.REMAINDER)
    diff = sub.add_parser("compare")
    diff.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "build":
        build(args.out, not args.per_tensor)
    elif args.command == "run":
        run(args.model, args.args[1:] if args.args[:1] == ["--"] else args.args)
    else:
        if len(args.folders) % 2:
            parser.error("compare takes pairs of folders")
        compare(args.folders)


if __name__ == "__main__":
    main()
