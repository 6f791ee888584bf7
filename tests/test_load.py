"""The API under concurrent clients (small: 32 clients x 3 requests on loopback): only 200s
and 429s, and every 200 in the audit log exactly once. The 2-minute soak is
`python scripts/load_api.py` (numbers in docs/RELIABILITY.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from guardrag.config.settings import Settings
from guardrag.core.audit import AuditSink
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.store import VectorStore
from guardrag.faces.api import create_app
from guardrag.faces.service import Guardrag, build_services
from tests.conftest import KB, REPO
from tests.test_api import serving

pytestmark = pytest.mark.slow  # 32 clients over real HTTP


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("load_api", REPO / "scripts" / "load_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_concurrent_clients_get_200_or_429_and_each_200_is_audited_once(
    sample_store: VectorStore, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    load = load_script()
    # A burst of 2 per client, refilled once a minute: each client's third request is a 429.
    settings = Settings(
        data_dir=tmp_path,
        default_kb=KB,
        llm_local=False,
        rate_limit_burst=2,
        rate_limit_per_minute=1,
    )
    sink = AuditSink.from_settings(settings, source="api")
    bot = Guardrag(build_services(settings, store=sample_store, embedder=embedder), settings, sink)
    with serving(create_app(bot, with_ui=False)) as url:
        report = load.run_load(
            url, load.question_mix(), clients=32, duration_s=60, max_requests=3, timeout_s=60
        )
    assert sink.flush()
    sink.close()
    assert report.errors == [] and set(report.statuses) <= {200, 429}, report.lines()
    assert report.requests == 96
    assert report.statuses == {200: 64, 429: 32}
    assert {"answered", "refused"} <= set(report.outcomes)
    audit = load.check_audit(tmp_path / "audit.sqlite3", report.request_ids)
    assert audit.ok, audit.line()  # 429s never reached the pipeline, so they are not audited
    assert audit.stored_rows == report.statuses[200]
    assert report.p95_ms >= report.p50_ms > 0
