"""Score a golden set in a scratch data dir: ingest the KB file, then `guardrag eval` over it.

    python scripts/score_golden.py datasets/ewallet/faq.jsonl datasets/ewallet/golden.jsonl \
        --kb kinetic --lang all
    python scripts/score_golden.py ../shared/data/seeds/tngd-faq/sample.json \
        ../shared/data/seeds/tngd-faq/golden_set.jsonl --kb tngd
    python scripts/score_golden.py ../shared/data/seeds/guideline-iq/finance_guidelines.jsonl \
        ../shared/data/seeds/guideline-iq/golden.jsonl --kb giq --description "FCA finance guidelines"
    python scripts/score_golden.py datasets/ewallet/faq.jsonl datasets/ewallet/golden.jsonl \
        --calibrate --penalty 5

Any other option goes to `guardrag eval` (--out, --knob, --compare, --calibrate, --limit...);
the report lands in eval/<kb>-<golden name>/ unless --out says otherwise. Prints "skipped"
and exits 0 when a file is missing (the public sets are not always there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kb_file", type=Path)
    parser.add_argument("golden", type=Path)
    parser.add_argument("--kb", default="golden")
    parser.add_argument("--description", default="")
    parser.add_argument("--lang", default="en", help="only cases in this language ('all' for all)")
    args, rest = parser.parse_known_args()
    for path in (args.kb_file, args.golden):
        if not path.exists():
            print(f"skipped: {path} not found", file=sys.stderr)
            return 0
    with tempfile.TemporaryDirectory() as data_dir:
        os.environ["GUARDRAG_DATA_DIR"] = data_dir
        from guardrag.faces.cli.main import app  # lazy: the data dir is set first

        command = ["eval", str(args.golden), "--kb", args.kb, "--ingest", str(args.kb_file)]
        command += ["--lang", args.lang or "all", "--description", args.description, *rest]
        try:
            app(command, prog_name="guardrag")
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
