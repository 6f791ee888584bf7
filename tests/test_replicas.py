"""Three replicas on loopback, one Postgres, one Redis, one published KB: one replica is
SIGKILLed under load and a re-ingest is published meanwhile (scripts/load_api.py drives them).

Every 200 is in the audit store exactly once, a conversation started on the killed replica
continues on another, the shared rate limit holds across replicas, and every surviving
replica serves the new snapshot. `guardrag serve --workers 2` is checked the same way, small.
"""

from __future__ import annotations

import importlib
import itertools
import json
import logging
import signal
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from guardrag.config.settings import Settings, SettingsError
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.store.edge import EdgeStore
from guardrag.faces.cli.serve import check_workers
from tests.conftest import KB, SAMPLE_FAQ
from tests.test_load import load_script

#: Low enough that the load outruns it even on a busy machine (a client gets an answer every
#: second or two there): a client's third request goes to the third replica, which has not
#: seen it and refuses it all the same; the 5 s Retry-After keeps clients asking past the kill.
BURST, PER_MINUTE = 2, 12.0
LOAD_S, KILL_AT_S = 12.0, 3.0
OUTSIDE = itertools.count()  # addresses of the requests the test makes beside the load
CHANGED_ID, CHANGED_QUESTION = "kw-account-001", "How do I sign up for Kinetic Wallet?"
MARKER = "(published during the load)"
FIRST_TURN = "How do I top up my Kinetic Wallet?"


def write_faq(path: Path, rows: int = 40, changed: bool = False) -> Path:
    """The first `rows` entries of the sample FAQ; `changed` edits one answer."""
    entries = [json.loads(line) for line in SAMPLE_FAQ.read_text().splitlines()[:rows]]
    for entry in entries:
        if changed and entry["id"] == CHANGED_ID:
            entry["answer"] = f"{entry['answer']} {MARKER}"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def publish(published: Path, embedder: OnnxEmbedder, faq: Path) -> str:
    """What `guardrag ingest` does, in this process (its embedder is already loaded)."""
    store = EdgeStore(published)
    try:
        return ingest(store, embedder, KB, [faq], description="Kinetic Wallet").snapshot_id
    finally:
        store.close()


def call(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A request from outside the load, each from an address of its own: /v1 is rate limited,
    and these observations should neither spend the load's budget nor wait on it."""
    n = next(OUTSIDE)
    address = f"10.99.{n // 250}.{n % 250 + 1}"
    response = httpx.request(
        method, url, headers={"X-Forwarded-For": address}, timeout=30, **kwargs
    )
    assert response.status_code == 200, response.text
    return response


def ask(url: str, question: str, asked: list[str], **body: Any) -> dict[str, Any]:
    """One question outside the load; its request id goes to `asked`."""
    answer = dict(call("POST", f"{url}/v1/ask", json={"question": question, **body}).json())
    asked.append(answer["request_id"])
    return answer


def snapshot_of(url: str) -> str | None:
    kbs = call("GET", f"{url}/v1/kbs").json()
    return next((k["snapshot_id"] for k in kbs if k["name"] == KB), None)


def scripts() -> tuple[ModuleType, ModuleType]:
    """scripts/load_api.py (the load, the audit check) and its sibling _replicas (the servers)."""
    load = load_script()  # puts scripts/ on sys.path for its sibling
    return load, importlib.import_module("_replicas")


@pytest.mark.slow  # real servers, several processes
def test_three_replicas_survive_a_kill_and_follow_a_reingest(
    tmp_path: Path, postgres_url: str, redis_url: str, embedder: OnnxEmbedder
) -> None:
    load, fleet = scripts()
    root, faq = tmp_path, tmp_path / "faq.jsonl"
    asked: list[str] = []  # request ids of the questions asked outside the load
    v1 = publish(root / "published", embedder, write_faq(faq))
    replicas = fleet.start_replicas(
        root,
        3,
        postgres_url,
        redis_url,
        args=("--no-ui",),
        rate_limit_burst=str(BURST),
        rate_limit_per_minute=str(PER_MINUTE),
    )
    doomed, survivors = replicas[0], replicas[1:]
    try:
        assert {snapshot_of(r.url) for r in replicas} == {v1}
        ask(doomed.url, FIRST_TURN, asked, thread_id="conv-1")
        results: dict[str, Any] = {}

        def drive() -> None:
            questions = load.faq_questions(faq)
            results["report"] = load.run_load(
                [r.url for r in replicas], questions, clients=9, duration_s=LOAD_S, timeout_s=30
            )

        driver = threading.Thread(target=drive)
        driver.start()
        time.sleep(KILL_AT_S)
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait()
        v2 = publish(root / "published", embedder, write_faq(faq, changed=True))
        driver.join(60)
        report = results["report"]

        # A re-ingest published once is served by every surviving replica.
        deadline = time.monotonic() + 15
        while {snapshot_of(r.url) for r in survivors} != {v2} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert {snapshot_of(r.url) for r in survivors} == {v2} != {v1}
        for replica in survivors:
            assert MARKER in ask(replica.url, CHANGED_QUESTION, asked)["answer"]

        # The conversation started on the killed replica continues on another one.
        follow_up = ask(survivors[0].url, "is it free?", asked, thread_id="conv-1")
        rewrite = next(d for d in follow_up["trail"] if d["node"] == "contextualize")
        assert FIRST_TURN in rewrite["detail"]["standalone"], rewrite
    finally:
        fleet.stop(survivors)

    # Only 200s and 429s; transport errors only from the killed replica.
    assert report.errors == [] and set(report.statuses) <= {0, 200, 429}, report.lines()
    assert set(report.unanswered) | set(report.refused_connections) <= {doomed.url}
    assert report.refused_connections.get(doomed.url), "no client noticed the kill"
    assert all(report.by_target[r.url].get(200) for r in survivors), report.lines()

    # The limit is shared: no client got more than one budget (burst + refill over the load,
    # on Redis's one clock) across the three replicas, where per-process limits would allow
    # three; and replicas refused clients they had never admitted, which only a shared bucket
    # can do. Redis never failed over to per-process limits meanwhile.
    budget = BURST + PER_MINUTE / 60 * report.seconds
    assert max(report.admitted.values()) <= budget, (report.admitted, budget)
    assert sum(report.admitted.values()) <= report.clients * budget
    assert report.refused_unseen > 0, report.lines()
    for replica in replicas:
        assert "Redis unavailable" not in (replica.data_dir / "serve.log").read_text()

    # Every 200 (load and conversation) in the audit store exactly once, none lost or doubled;
    # rows beyond them only for requests the kill cut short.
    ids = [*report.request_ids, *asked]
    audit = load.check_audit(postgres_url, ids, "", sum(report.unanswered.values()))
    assert audit.ok and not audit.missing, audit.line()


@pytest.mark.slow  # real servers, several processes
def test_workers_each_serve_their_own_copy_and_follow_a_reingest(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """`guardrag serve --workers 2` on embedded Edge: both workers answer from their own copy
    of DATA_DIR's KB (one process per shard), pick up a re-ingest, and share the SQLite audit
    log and threads; a clean stop removes their copies."""
    load, fleet = scripts()
    faq = tmp_path / "faq.jsonl"
    asked: list[str] = []
    publish(tmp_path, embedder, write_faq(faq, rows=12))
    env = fleet.base_env(data_dir=str(tmp_path), rate_limit_burst="1000")
    url, process = fleet.start_server(env, tmp_path / "serve.log", ("--workers", "2"))
    try:
        fleet.wait_ready(url, process)
        report = load.run_load(url, load.faq_questions(faq), clients=6, duration_s=4)
        assert set(report.statuses) == {200} and report.outcomes == {"answered": report.requests}
        publish(tmp_path, embedder, write_faq(faq, rows=12, changed=True))
        time.sleep(2.5)  # two follower polls
        for _ in range(12):  # spread over both workers
            assert MARKER in ask(url, CHANGED_QUESTION, asked)["answer"]
        ask(url, FIRST_TURN, asked, thread_id="w")
        follow_up = ask(url, "is it free?", asked, thread_id="w")
        rewrite = next(d for d in follow_up["trail"] if d["node"] == "contextualize")
        assert FIRST_TURN in rewrite["detail"]["standalone"]
    finally:
        fleet.stop([fleet.Replica(url, process, tmp_path)])
    assert process.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]
    assert not [p for p in (tmp_path / "edge-copies").iterdir() if p.is_dir()]
    audit = load.check_audit(tmp_path / "audit.sqlite3", [*report.request_ids, *asked])
    assert audit.ok, audit.line()


def test_workers_refuse_the_ui_and_warn_without_a_shared_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(data_dir=tmp_path)
    assert check_workers(settings, 1, None) is True  # one process: the UI as before
    with pytest.raises(SettingsError, match="--workers 1"):
        check_workers(settings, 2, True)
    with caplog.at_level(logging.WARNING, logger="guardrag.serve"):
        assert check_workers(settings, 3, None) is False
        assert check_workers(Settings(redis_url="redis://127.0.0.1:1/0"), 3, None) is False
    assert caplog.text.count("rate limits are per worker") == 1
