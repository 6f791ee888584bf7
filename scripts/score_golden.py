"""Score a golden set end to end: ingest a KB into a scratch data dir, run every case, report.

    python scripts/score_golden.py datasets/ewallet/faq.jsonl datasets/ewallet/golden.jsonl
    python scripts/score_golden.py ../shared/data/seeds/tngd-faq/sample.json \
        ../shared/data/seeds/tngd-faq/golden_set.jsonl --kb tngd
    python scripts/score_golden.py ../shared/data/seeds/guideline-iq/finance_guidelines.jsonl \
        ../shared/data/seeds/guideline-iq/golden.jsonl --kb guidelines --description "FCA finance guidelines"
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from config.settings import Settings
from guardrag.embedder import OnnxEmbedder
from guardrag.evaluate import Score, judge, load_cases
from guardrag.ingest import ingest
from guardrag.service import Guardrag, build_services
from guardrag.store import open_store


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kb_file", type=Path)
    parser.add_argument("golden", type=Path)
    parser.add_argument("--kb", default="golden")
    parser.add_argument("--description", default="")
    parser.add_argument("--lang", default="en", help="only cases in this language ('' for all)")
    parser.add_argument(
        "--knob", action="append", default=[], help="run-config override, e.g. min_relevance=0.5"
    )
    parser.add_argument("--dump", type=Path, help="write every result as JSONL here")
    args = parser.parse_args()
    for path in (args.kb_file, args.golden):
        if not path.exists():
            print(f"skipped: {path} not found", file=sys.stderr)
            return 0
    knobs = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.knob)}
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=Path(data_dir), default_kb=args.kb)
        store, embedder = open_store(Path(data_dir), None, None), OnnxEmbedder()
        print(
            ingest(store, embedder, args.kb, [args.kb_file], description=args.description).summary()
        )
        bot = Guardrag(build_services(settings, store=store, embedder=embedder), settings)
        cases = load_cases(args.golden, args.lang or None)
        score = Score()
        dump = args.dump.open("w") if args.dump else None
        for case in cases:
            result = bot.ask(case.question, args.kb, row_id=case.id, knobs=knobs)
            ok, why = judge(case, result)
            score.add(case, result, ok, why)
            if dump:
                dump.write(
                    json.dumps({"case": case.id, "ok": ok, **result.model_dump(mode="json")}) + "\n"
                )
        bot.close()
    print(score.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
