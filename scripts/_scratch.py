"""A knowledge base ingested into a scratch data dir and asked in-process, for the measuring
scripts (measure_entry_judge.py, measure_choice_order.py): no model unless a script asks one, the
second opinion on (`data/models` or GUARDRAG_LLM_MODEL_DIR)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from guardrag.config.settings import Settings
from guardrag.faces.service import Guardrag

REPO = Path(__file__).resolve().parents[1]
MODELS = Path(os.environ.get("GUARDRAG_LLM_MODEL_DIR", REPO / "data" / "models"))
SHARED = Path(os.environ.get("GUARDRAG_SHARED_DATA", REPO.parent / "shared" / "data")) / "faq"
#: The fitting KBs of the measuring scripts: name -> (its entries, its questions with gold ids).
#: covidfaq is held out and never among them.
FITTING_SETS = {
    **{
        kb: (REPO / "datasets" / kb / "faq.jsonl", REPO / "datasets" / kb / "golden.jsonl")
        for kb in ("ewallet", "telco", "gym", "courier")
    },
    "medquad": (SHARED / "medquad-liveqa/kb.jsonl", SHARED / "medquad-liveqa/queries.jsonl"),
    "semeval": (
        SHARED / "semeval16-qatarliving/kb.jsonl",
        SHARED / "semeval16-qatarliving/queries.jsonl",
    ),
    "dstc11": (
        SHARED / "dstc11-hotel-restaurant-faq/kb.jsonl",
        SHARED / "dstc11-hotel-restaurant-faq/queries.jsonl",
    ),
}
#: dstc11 has 2,054 queries: a fixed sample keeps the run short.
SAMPLE, SEED = 600, 37


def scratch_bot(kb: str, faq: Path) -> Guardrag:
    """`faq` ingested as `kb` into a fresh scratch data dir, and the pipeline over it."""
    data = Path(tempfile.mkdtemp(prefix=f"scratch-{kb}-"))
    env = {**os.environ, "GUARDRAG_DATA_DIR": str(data), "GUARDRAG_LLM_LOCAL": "false"}
    guardrag = str(Path(sys.executable).parent / "guardrag")
    subprocess.run([guardrag, "ingest", str(faq), "--kb", kb], env=env, check=True)
    settings = Settings(data_dir=data, llm_local=False, llm_model_dir=MODELS)
    return Guardrag.from_settings(settings, audit=False)


def rows_of(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSONL file (a KB's entries, a golden or queries file), blank lines left
    out."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def english_cases(golden: Path, sample: int, seed: int) -> list[dict[str, Any]]:
    """The one-turn English cases of a golden or queries file; a fixed sample of `sample` when
    there are more."""
    cases = rows_of(golden)
    cases = [c for c in cases if c.get("lang", "en") == "en" and not c.get("history")]
    return random.Random(seed).sample(cases, sample) if len(cases) > sample else cases


def gold_of(case: dict[str, Any]) -> list[str]:
    """A case's gold entries: a golden set's expected ids, a public set's `gold_ids`; [] when it
    must be refused."""
    if case.get("expected") not in (None, "answer"):
        return []
    one = [case["expected_source_id"]] if case.get("expected_source_id") else []
    return list(case.get("gold_ids") or case.get("expected_source_ids") or one)
