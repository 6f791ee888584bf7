"""Regression tests for the attacks of issue 20 on the HTTP API: input that cannot be
represented, requests that escaped the audit log, keys in URLs and their access-log lines,
/metrics across tenants, and the audit guarantee (fail closed unless best-effort)."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from guardrag.config.settings import Settings
from guardrag.core.audit import AuditSink, SQLiteAuditStore
from guardrag.faces.api import create_app
from guardrag.faces.api.middleware import ScrubCredentials, body_problem, scrub_url
from guardrag.faces.service import Guardrag
from guardrag.faces.views import RecentResults
from guardrag.graph.context import Services
from tests.conftest import KB
from tests.test_api import TOP_UP, services, serving  # noqa: F401

KEY = "hardening-key-0001"

#: The bodies of the report: each got HTTP 500, or ran the pipeline unaudited.
UNREPRESENTABLE = [
    b'{"question": "\\ud800"}',
    b'{"question": "How do I top up? \\udfff", "thread_id": "t1"}',
    b'{"question": NaN}',
    b'{"question": Infinity}',
    b'{"question": -Infinity}',
    b'{"question": "x", "kb": "\\ud800"}',
    b'{"\\ud800": 1, "question": "x"}',
    b'{"question": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"question": ' + b"[" * 40 + b"1" + b"]" * 40 + b"}",
    b'{"model": "kinetic", "messages": [{"role": "user", "content": "\\ud800"}]}',
]


@pytest.fixture
def audited(services: Services, tmp_path: Path) -> Iterator[Guardrag]:  # noqa: F811
    db = tmp_path / "audit.sqlite3"
    sink = AuditSink(lambda: SQLiteAuditStore(db), tmp_path / "spool", log_requests=False)
    yield Guardrag(services, Settings(data_dir=tmp_path, default_kb=KB), sink)
    sink.close()


def _rows(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0])


@pytest.mark.parametrize("body", UNREPRESENTABLE, ids=range(len(UNREPRESENTABLE)))
def test_unrepresentable_input_is_422_before_the_pipeline(
    audited: Guardrag, tmp_path: Path, body: bytes
) -> None:
    recent = RecentResults()
    with TestClient(create_app(audited, recent=recent, with_ui=False)) as client:
        for path in ("/v1/ask", "/v1/ask/stream", "/v1/chat/completions"):
            response = client.post(path, content=body)
            assert response.status_code == 422, (path, response.text)
            [problem] = response.json()["detail"]
            assert problem["loc"] == ["body"] and problem["msg"]
            assert response.json()["request_id"] == response.headers["x-request-id"]
    assert recent.items() == []  # the pipeline never ran
    assert audited.audit is not None and audited.audit.flush()
    assert _rows(tmp_path / "audit.sqlite3") == 0
    assert audited.threads.history("open.t1") == []  # and remembered nothing


def test_messages_say_what_is_wrong() -> None:
    assert body_problem(b'{"question": NaN}') == (422, "NaN is not a JSON number")
    status, why = body_problem(b'{"question": "a\\ud800"}') or (0, "")
    assert status == 422 and "body.question" in why and "lone UTF-16 surrogate" in why
    assert body_problem(b"{") == (
        400,
        "the body is not valid JSON (Expecting property name "
        "enclosed in double quotes at line 1 column 2)",
    )
    assert body_problem(b'{"question": "fine \\u00e9 \\ud83d\\ude42"}') is None  # a real pair


def test_422_bodies_never_echo_the_input(audited: Guardrag) -> None:
    """Pydantic's own 422 carries the offending value (`input`); ours says where and why only."""
    secret = "4111 1111 1111 1111 my card"
    bodies: list[dict[str, Any]] = [
        {"question": [secret]},
        {"question": "x", "thread_id": {"v": secret}},
        {"question": "x", "knobs": secret},
        {"model": KB, "messages": [{"role": "user", "content": {"v": secret}}]},
    ]
    with TestClient(create_app(audited, with_ui=False)) as client:
        for body in bodies:
            path = "/v1/chat/completions" if "model" in body else "/v1/ask"
            response = client.post(path, json=body)
            assert response.status_code == 422, (body, response.text)
            assert secret not in response.text and '"input"' not in response.text, response.text
            assert all(p["loc"] and p["msg"] for p in response.json()["detail"])


def test_an_answer_waits_for_its_audit_record(audited: Guardrag) -> None:
    """The response leaves only once the record is in the store (or the spool)."""
    assert audited.audit is not None
    with TestClient(create_app(audited, with_ui=False)) as client:
        for path in ("/v1/ask", "/v1/chat/completions"):
            body: dict[str, Any] = (
                {"question": TOP_UP}
                if path == "/v1/ask"
                else {"model": KB, "messages": [{"role": "user", "content": TOP_UP}]}
            )
            response = client.post(path, json=body)
            data = response.json()
            rid = data["request_id"] if path == "/v1/ask" else data["guardrag"]["request_id"]
            assert audited.audit.confirm(rid, timeout=0) == "written"


class _Down:
    def __call__(self) -> SQLiteAuditStore:
        raise sqlite3.OperationalError("database is locked")


def test_unauditable_requests_are_not_answered_unless_best_effort(
    services: Services,  # noqa: F811
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("the spool cannot live under a file")
    for best_effort, expected in ((False, 503), (True, 200)):
        sink = AuditSink(_Down(), blocked / "spool", log_requests=False, retry_s=3600)
        settings = Settings(data_dir=tmp_path, default_kb=KB, audit_best_effort=best_effort)
        with TestClient(create_app(Guardrag(services, settings, sink), with_ui=False)) as c:
            asked = c.post("/v1/ask", json={"question": TOP_UP})
            streamed = c.post("/v1/ask/stream", json={"question": TOP_UP}).text
        assert asked.status_code == expected, asked.text
        if not best_effort:
            assert "audit log could not record this request" in asked.json()["detail"]
            assert "event: error" in streamed and "event: final" not in streamed
            assert "top up" not in asked.text.lower()  # no answer leaked in the refusal
        sink.close(timeout=1)


def test_a_failing_store_is_caught_by_the_spool(services: Services, tmp_path: Path) -> None:  # noqa: F811
    sink = AuditSink(_Down(), tmp_path / "spool", log_requests=False, retry_s=3600)
    bot = Guardrag(services, Settings(data_dir=tmp_path, default_kb=KB), sink)
    with TestClient(create_app(bot, with_ui=False)) as client:
        response = client.post("/v1/ask", json={"question": TOP_UP})
    assert response.status_code == 200
    assert sink.confirm(response.json()["request_id"], timeout=0) == "spooled"
    assert sink.spool.pending == 1
    sink.close(timeout=1)


def test_keys_in_the_url_are_refused(services: Services, tmp_path: Path) -> None:  # noqa: F811
    settings = Settings(data_dir=tmp_path, default_kb=KB, api_key=SecretStr(KEY))
    with TestClient(create_app(Guardrag(services, settings), with_ui=False)) as client:
        for url in (f"/v1/kbs?api_key={KEY}", f"/v1/kbs?x=1&TOKEN={KEY}", f"/metrics?key={KEY}"):
            response = client.get(url, headers={"X-API-Key": KEY})
            assert response.status_code == 401 and KEY not in response.text
            assert "X-API-Key header" in response.json()["detail"]
        assert client.get("/v1/kbs", headers={"X-API-Key": KEY}).status_code == 200
        bearer = client.get("/v1/kbs", headers={"Authorization": f"Bearer {KEY}"})
        assert bearer.status_code == 200  # the header OpenAI's SDKs send


def test_access_log_lines_never_hold_a_key() -> None:
    assert scrub_url(f"/v1/kbs?api_key={KEY}&x=1") == "/v1/kbs?api_key=[redacted]&x=1"
    assert scrub_url("/v1/kbs?x=1") == "/v1/kbs?x=1" and scrub_url("/v1/kbs") == "/v1/kbs"
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"/v1/ask?token={KEY}", "1.1", 401), None,
    )  # fmt: skip
    assert ScrubCredentials().filter(record) and KEY not in record.getMessage()


@pytest.mark.slow
def test_a_real_server_logs_no_key_from_a_url(services: Services, tmp_path: Path) -> None:  # noqa: F811
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    access = logging.getLogger("uvicorn.access")
    handler = Keep()
    settings = Settings(data_dir=tmp_path, default_kb=KB, api_key=SecretStr(KEY))
    app = create_app(Guardrag(services, settings), with_ui=False)
    with serving(app, log_level="info") as base:  # uvicorn configures its loggers at start
        access.addHandler(handler)
        try:
            response = httpx.get(f"{base}/v1/kbs?api_key={KEY}", timeout=10)
        finally:
            access.removeHandler(handler)
    assert response.status_code == 401
    assert any("/v1/kbs?api_key=[redacted]" in line for line in lines), lines
    assert not any(KEY in line for line in lines)


def test_metrics_show_no_tenant_data_without_their_token(
    services: Services,  # noqa: F811
    tmp_path: Path,
) -> None:
    keyed = Settings(data_dir=tmp_path, default_kb=KB, api_keys=f"{KEY}={KB}")
    with TestClient(create_app(Guardrag(services, keyed), with_ui=False)) as client:
        client.post("/v1/ask", json={"question": TOP_UP}, headers={"X-API-Key": KEY})
        public = client.get("/metrics")
    assert public.status_code == 200 and "guardrag_requests_total" not in public.text
    token = SecretStr("metrics-token-1")
    guarded = Settings(
        data_dir=tmp_path, default_kb=KB, api_keys=f"{KEY}={KB}", metrics_token=token
    )
    with TestClient(create_app(Guardrag(services, guarded), with_ui=False)) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
        full = client.get("/metrics", headers={"Authorization": "Bearer metrics-token-1"})
    assert full.status_code == 200 and "guardrag_requests_total" in full.text


def test_the_openapi_spec_documents_what_is_returned(audited: Guardrag) -> None:
    with TestClient(create_app(audited, with_ui=False)) as client:
        spec = client.get("/openapi.json").json()
    for path, method in (("/v1/ask", "post"), ("/v1/chat/completions", "post")):
        codes = set(spec["paths"][path][method]["responses"])
        assert {"200", "400", "404", "413", "422", "429", "503"} <= codes, (path, codes)
    assert json.dumps(spec).count("cdn.jsdelivr") == 0
