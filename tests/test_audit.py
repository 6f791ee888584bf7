"""The audit store and `guardrag audit`: migrations, round trips, redaction, concurrency,
crash safety, spooling, replay and the CLI."""

from __future__ import annotations

import io
import json
import logging
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from guardrag.config.settings import Settings
from guardrag.contract import Citation, Decision, Refusal, RefusalReason, Result, Usage
from guardrag.core.audit import (
    AuditSchemaError,
    AuditSink,
    PostgresAuditStore,
    SqlAuditStore,
    SQLiteAuditStore,
    build_record,
    configure_json_logging,
    open_audit_store,
)
from guardrag.core.audit.migrations import MIGRATIONS, Migration, pending
from guardrag.core.audit.spool import Spool
from guardrag.core.audit.stats import compute_stats
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.faces.cli.audit import audit_app
from guardrag.faces.replay import replay
from tests.conftest import KB, REPO, SAMPLE_FAQ
from tests.fakes import ScriptedChatModel
from tests.servers import TempPostgres

#: Raw values that must never reach a column, a spool line or a log line.
PII_QUESTIONS = {
    "4111 1111 1111 1111": "my card 4111 1111 1111 1111 was charged twice, why?",
    "5555-5555-5555-4444": "refund to card 5555-5555-5555-4444 please",
    "ali.baba@example.com": "email the receipt to ali.baba@example.com",
    "012-345 6789": "call me at 012-345 6789 about my top up",
    "+60 12-987 6543": "my number is +60 12-987 6543",
    "900101-14-5678": "my IC is 900101-14-5678, can I register?",
    "880202105566": "nric 880202105566 verification failed",
    "482913": "my OTP is 482913 but it says expired",
    "7391": "PIN: 7391 is not accepted",
}


def make_result(i: int, question: str = "How do I top up?", refused: bool = False) -> Result:
    """A realistic Result without running the pipeline (fast enough for thousands)."""
    trail = [
        Decision(node="moderate_input", verdict="pass", ms=0.4),
        Decision(
            node="classify",
            verdict="pass",
            reason="kb_similarity",
            score=0.71,
            threshold=0.34,
            ms=3.1,
        ),
        Decision(node="exact_match", verdict="miss", ms=0.2),
        Decision(node="retrieve", verdict="pass", detail={"hits": 10}, ms=5.0 + i % 7),
        Decision(node="rerank", verdict="hit", score=0.8, threshold=0.45, ms=1.5),
    ]
    if refused:
        return Result(
            question=question,
            request_id=f"req-{i:06d}",
            outcome="refused",
            refusal=Refusal(
                reason=RefusalReason.PAYMENT_DATA,
                stage="moderate_input",
                kind="blocked",
                message="Please never share card numbers here.",
            ),
            answer="Please never share card numbers here.",
            trail=[Decision(node="moderate_input", verdict="block", reason="payment.card", ms=0.5)],
            latency_ms=1.0,
        )
    return Result(
        id=f"row-{i}",
        question=question,
        request_id=f"req-{i:06d}",
        outcome="answered",
        route="semantic_match",
        answer="Open the app and tap Top Up.",
        citations=[Citation(source_id="kw-top-up-001", title="How do I top up?", score=0.91)],
        confidence=0.91,
        trail=trail,
        usage=Usage(prompt_tokens=120, completion_tokens=30, estimated_cost_usd=0.00004),
        latency_ms=12.5 + i % 5,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "audit.sqlite3"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, db: Path) -> str:
    """The audit store's URL on each backend: a SQLite file, a fresh Postgres database."""
    return str(db) if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def sink_factory(tmp_path: Path, db: Path) -> Iterator[Callable[..., AuditSink]]:
    sinks: list[AuditSink] = []

    def make(**options: object) -> AuditSink:
        opener = options.pop("store", None) or (lambda: SQLiteAuditStore(db))
        sink = AuditSink(opener, tmp_path / "spool", **options)  # type: ignore[arg-type]
        sinks.append(sink)
        return sink

    yield make
    for sink in sinks:
        sink.close()


def on(url: str) -> Callable[[], SqlAuditStore]:
    """An opener of the store at `url`, for AuditSink(store=...)."""
    return lambda: open_audit_store(url)


def row_text(url: str) -> str:
    """Every stored value of every audit table, as one string."""
    store = open_audit_store(url)
    try:
        return "\n".join(
            repr(row)
            for table in ("requests", "decisions", "feedback")
            for row in store.query(f"SELECT * FROM {table}")
        )
    finally:
        store.close()


# -- migrations -----------------------------------------------------------------------------
def test_migrations_are_idempotent_and_forward_only(url: str) -> None:
    store = open_audit_store(url)
    assert store.applied_migrations() == [1, 2]
    assert store.migrate() == []  # a second run applies nothing
    store.close()
    open_audit_store(url).close()  # nor does another process opening it

    table = "CREATE TABLE extra (x INTEGER);"
    extra = Migration(3, "extra", table, table)
    newer = open_audit_store(url, migrations=(*MIGRATIONS, extra))
    assert newer.applied_migrations() == [1, 2, 3]
    newer.close()
    with pytest.raises(AuditSchemaError, match="newer version"):
        open_audit_store(url)  # older code never writes a newer schema
    with pytest.raises(AuditSchemaError, match="renamed"):
        pending({1: "requests_and_decisions", 2: "renamed"}, MIGRATIONS)
    with pytest.raises(AuditSchemaError, match="before already applied"):
        pending({1: "requests_and_decisions", 3: "extra"}, (*MIGRATIONS, extra))


def test_history_is_append_only(url: str) -> None:
    store = open_audit_store(url)
    store.write([build_record(make_result(1), kb=KB)])
    for statement in (
        "UPDATE requests SET outcome = 'answered'",
        "DELETE FROM requests",
        "UPDATE decisions SET ms = 0",
        "DELETE FROM decisions",
    ):
        with pytest.raises(Exception, match="append-only"):  # sqlite3's or psycopg's error
            store.query(statement)
    store.write([build_record(make_result(1), kb=KB)])  # a duplicate id is ignored, not merged
    assert store.count() == 1
    store.close()


# -- round trip, stats, logs -----------------------------------------------------------------
def test_records_round_trip_with_feedback_and_stats(
    sink_factory: Callable[..., AuditSink], url: str
) -> None:
    sink = sink_factory(store=on(url))
    answered, refused = make_result(1), make_result(2, "card 4111 1111 1111 1111", refused=True)
    sink.record(answered, kb=KB, knobs={"top_k": 5}, snapshot_id="snap1", thread_id="t-1")
    sink.record(refused, kb=KB, models={"chat": "gpt-4o-mini"})
    sink.feedback(answered.request_id, 1, "helpful, thanks")
    assert sink.flush()
    assert sink.stats.written == 3 and sink.stats.spooled == 0

    store = open_audit_store(url)
    record = store.get(answered.request_id)
    assert record is not None
    assert record.snapshot_id == "snap1" and record.thread_id == "t-1"
    assert record.config["top_k"] == 5 and record.config["min_relevance"] == 0.35
    assert record.config_hash == build_record(answered, kb=KB, knobs={"top_k": 5}).config_hash
    assert record.config_hash != build_record(answered, kb=KB).config_hash
    assert (record.route, record.citations[0]["source_id"]) == ("semantic_match", "kw-top-up-001")
    assert [s["node"] for s in record.trail] == [d.node for d in answered.trail]
    assert (record.prompt_tokens, record.completion_tokens) == (120, 30)
    with pytest.raises(KeyError, match="ambiguous"):
        store.get("req-0000")  # a prefix must name one request
    denied = store.get(refused.request_id)
    assert denied is not None
    assert (denied.refusal_reason, denied.refusal_stage, denied.refusal_kind) == (
        "payment_data",
        "moderate_input",
        "blocked",
    )
    assert [f.score for f in store.feedback_for(answered.request_id)] == [1]

    stats = compute_stats(store)
    assert stats.requests == 2 and stats.by_outcome == {"answered": 1, "refused": 1}
    assert stats.by_reason[0].reason == "payment_data"
    assert {n.node for n in stats.nodes} >= {"classify", "retrieve", "moderate_input"}
    assert stats.days[0].cost_usd == pytest.approx(0.00004)
    assert stats.feedback == 1
    store.close()


def test_request_log_lines_are_json_with_request_ids(
    sink_factory: Callable[..., AuditSink],
) -> None:
    stream = io.StringIO()
    logger = logging.getLogger("guardrag")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    configure_json_logging(stream=stream)
    try:
        sink = sink_factory()
        sink.record(make_result(7, PII_QUESTIONS["ali.baba@example.com"]), kb=KB)
        assert sink.flush()
    finally:
        logger.handlers, logger.propagate = handlers, propagate
        logger.setLevel(level)
    line = json.loads(stream.getvalue().splitlines()[0])
    assert line["request_id"] == "req-000007" and line["outcome"] == "answered"
    assert line["nodes_ms"]["classify"] == 3.1
    assert "ali.baba" not in stream.getvalue()


# -- redaction -------------------------------------------------------------------------------
def test_no_raw_pii_in_any_column(sink_factory: Callable[..., AuditSink], url: str) -> None:
    sink = sink_factory(store=on(url))
    for i, question in enumerate(PII_QUESTIONS.values()):
        result = make_result(i, question, refused=i % 2 == 0)
        # A guard's detail or an answer echoing the question must be redacted too.
        result.trail.append(Decision(node="echo", verdict="pass", detail={"seen": [question]}))
        result = result.model_copy(update={"answer": question, "id": question})
        sink.record(result, kb=KB)
        sink.feedback(result.request_id, -1, question)
    assert sink.flush()
    stored = row_text(url)
    for raw in PII_QUESTIONS:
        digits = "".join(ch for ch in raw if ch.isdigit())
        # As a standalone token: a short PIN's digits may occur inside a hash or a timestamp.
        standalone = re.compile(rf"(?<![0-9A-Za-z]){re.escape(digits)}(?![0-9A-Za-z])")
        assert raw not in stored and not (digits and standalone.search(stored)), raw
    assert "[card]" in stored and "[email]" in stored and "[credential]" in stored
    store = open_audit_store(url)
    record = store.get("req-000000")
    assert record is not None and record.redactions.get("card") == 2  # question and row id
    store.close()


# -- concurrency and crashes -----------------------------------------------------------------
def test_thousand_records_from_eight_threads(
    sink_factory: Callable[..., AuditSink], url: str
) -> None:
    sink = sink_factory(store=on(url))

    def worker(start: int) -> None:
        for i in range(start, 1000, 8):
            sink.record(make_result(i), kb=KB)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sink.flush()
    store = open_audit_store(url)
    assert store.count() == 1000
    assert store.query("SELECT COUNT(DISTINCT request_id) FROM decisions")[0][0] == 1000
    assert sink.stats.written == 1000
    store.close()


_CHILD = textwrap.dedent(
    """
    import sys, threading
    from guardrag.core.audit.record import AuditRecord
    from guardrag.core.audit.store import open_audit_store

    store = open_audit_store(sys.argv[1])
    template = AuditRecord.model_validate_json(sys.argv[2])
    lock = threading.Lock()

    def writer(n: int) -> None:
        i = 0
        while True:
            i += 1
            ids = [f"{sys.argv[3]}-{n}-{i}-{k}" for k in range(5)]
            store.write([template.model_copy(update={"request_id": r}) for r in ids])
            with lock:  # only ids whose transaction committed are announced
                print(" ".join(ids), flush=True)

    for n in range(4):
        threading.Thread(target=writer, args=(n,), daemon=True).start()
    threading.Event().wait()
    """
)


def _spawn_writer(url: str, tag: str) -> subprocess.Popen[str]:
    template = build_record(make_result(0), kb=KB).model_dump_json()
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, url, template, tag],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_sigkill_mid_write_loses_no_committed_row(url: str) -> None:
    open_audit_store(url).close()
    children = [_spawn_writer(url, tag) for tag in ("a", "b")]  # two processes, one store
    committed: set[str] = set()
    try:
        for child in children:
            assert child.stdout is not None
            while len(committed) < 300:
                line = child.stdout.readline()
                assert line, "writer died"
                committed.update(line.split())
    finally:
        for child in children:
            child.send_signal(signal.SIGKILL)
            child.wait()
    for child in children:  # lines printed before the kill are committed ids too
        assert child.stdout is not None
        committed.update(child.stdout.read().split())
    store = open_audit_store(url)
    if isinstance(store, SQLiteAuditStore):
        assert store.integrity_check() == "ok"
    stored = {row[0] for row in store.query("SELECT request_id FROM requests")}
    assert committed <= stored
    assert store.count() >= len(committed) >= 300
    # Every stored request has all of its decisions: no transaction was torn by the kill.
    assert store.query("SELECT COUNT(*) FROM decisions")[0][0] == 5 * store.count()
    store.close()


# -- spool and retry ---------------------------------------------------------------------------
def test_locked_store_spools_then_flushes(
    sink_factory: Callable[..., AuditSink], db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    SQLiteAuditStore(db).close()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    sink = sink_factory(store=lambda: SQLiteAuditStore(db, busy_timeout_s=0.05), retry_s=0.1)
    with caplog.at_level(logging.WARNING, logger="guardrag.audit"):
        for i in range(10):
            sink.record(make_result(i), kb=KB)
        assert not sink.flush(retry=False)  # all queued work done, but only to the spool
        assert sink.stats.spooled == 10 and sink.stats.written == 0
        assert len(sink.spool.path.read_text().splitlines()) == 10
        assert "store unavailable" in caplog.text and "spooling" in caplog.text
        blocker.rollback()
        assert sink.flush()
    assert sink.stats.flushed == 10
    assert "flushed" in caplog.text
    store = SQLiteAuditStore(db)
    assert store.count() == 10
    store.close()
    blocker.close()


def test_full_disk_spools_then_flushes(
    sink_factory: Callable[..., AuditSink], db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = {"full": True}

    def open_store() -> SQLiteAuditStore:
        store = SQLiteAuditStore(db)
        if disk["full"]:  # SQLite's own size cap: a real SQLITE_FULL on the next new page
            store.set_max_pages(store.page_count())
        return store

    sink = sink_factory(store=open_store, retry_s=0.1)
    with caplog.at_level(logging.WARNING, logger="guardrag.audit"):
        for i in range(200):
            sink.record(make_result(i), kb=KB)
        assert not sink.flush(retry=False)
        assert sink.stats.spooled > 0
        assert "full" in caplog.text
        disk["full"] = False
        assert sink.flush()
    assert sink.stats.written + sink.stats.flushed == 200
    store = SQLiteAuditStore(db)
    assert store.count() == 200 and store.integrity_check() == "ok"
    store.close()


def test_no_spool_either_holds_in_memory_and_writes_later(
    tmp_path: Path, db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    down = {"store": True}

    def open_store() -> SQLiteAuditStore:
        if down["store"]:
            raise sqlite3.OperationalError("unable to open database file")
        return SQLiteAuditStore(db)

    (tmp_path / "not-a-dir").write_text("")
    sink = AuditSink(open_store, tmp_path / "not-a-dir" / "spool", retry_s=0.1)
    with caplog.at_level(logging.WARNING, logger="guardrag.audit"):
        sink.record(make_result(1), kb=KB)
        assert not sink.flush(retry=False)
        assert sink.stats.held == 1
        assert "held in memory" in caplog.text
        down["store"] = False
        assert sink.flush()
    sink.close()
    assert sink.stats.held == 0 and sink.stats.written == 1


def test_orphan_spool_of_a_dead_process_is_adopted(
    tmp_path: Path, db: Path, sink_factory: Callable[..., AuditSink]
) -> None:
    live = Spool(tmp_path / "spool")
    live.append([build_record(make_result(1), kb=KB)])
    other = Spool(tmp_path / "spool")
    assert other.flush(SQLiteAuditStore(db).write) == 0  # its owner is alive: hands off
    assert live._handle is not None
    live._handle.close()  # the owner dies (the kernel drops its lock), the file stays
    sink = sink_factory()
    assert sink.flush()
    assert sink.stats.flushed == 1
    assert not list((tmp_path / "spool").glob("*.jsonl"))


def test_record_never_raises(
    sink_factory: Callable[..., AuditSink], db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import guardrag.core.audit.sink as sink_module

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("bug")

    sink = sink_factory()
    monkeypatch.setattr(sink_module, "build_record", broken)
    sink.record(make_result(1, PII_QUESTIONS["ali.baba@example.com"]), kb=KB)
    assert sink.flush()
    assert sink.stats.build_errors == 1
    store = SQLiteAuditStore(db)
    stub = store.get("req-000001")
    assert stub is not None and stub.question.startswith("[unrecorded")
    store.close()


# -- replay and the CLI ----------------------------------------------------------------------
def invoke(data_dir: Path, *args: str, audit_url: str = "") -> tuple[int, str]:
    env = {
        "GUARDRAG_DATA_DIR": str(data_dir),
        "GUARDRAG_DEFAULT_KB": KB,
        "GUARDRAG_AUDIT_URL": audit_url,
    }
    done = CliRunner().invoke(audit_app, list(args), env=env)
    return done.exit_code, done.output


def test_cli_tail_show_stats_export(tmp_path: Path, url: str) -> None:
    store = open_audit_store(url)
    store.write([build_record(make_result(i, refused=i % 3 == 0), kb=KB) for i in range(30)])
    store.close()

    def _invoke(data_dir: Path, *args: str) -> tuple[int, str]:
        return invoke(data_dir, *args, audit_url=url if data_dir == tmp_path else "")

    code, out = _invoke(tmp_path, "tail", "-n", "5")
    assert code == 0 and len(out.splitlines()) == 5 and "req-0000" in out
    code, out = _invoke(tmp_path, "show", "req-000001")
    assert code == 0 and "retrieve" in out and "kw-top-up-001" in out
    code, out = _invoke(tmp_path, "show", "req-000001", "--json")
    assert json.loads(out)["request_id"] == "req-000001"
    code, out = _invoke(tmp_path, "show", "nope-nope")
    assert code == 2
    code, out = _invoke(tmp_path, "stats")
    assert code == 0 and "p95" in out and "payment_data" in out and "retrieve" in out
    code, out = _invoke(tmp_path, "stats", "--json", "--since", "1d")
    assert json.loads(out)["requests"] == 30
    code, _ = _invoke(tmp_path, "export", "--format", "csv", "--out", str(tmp_path / "a.csv"))
    assert code == 0 and len((tmp_path / "a.csv").read_text().splitlines()) == 31
    code, out = _invoke(tmp_path, "export", "--format", "jsonl")
    assert code == 0 and len(out.splitlines()) == 30
    code, out = _invoke(tmp_path, "export", "--since", "1d", "--kb", KB)
    assert code == 0 and len(out.splitlines()) == 30
    code, out = _invoke(tmp_path / "empty", "tail")
    assert code == 2 and "no audit log" in out


@pytest.mark.slow
def test_replay_reports_the_edit_of_the_cited_entry(
    tmp_path: Path, embedder: OnnxEmbedder, sink_factory: Callable[..., AuditSink], db: Path
) -> None:
    from guardrag.core.store import open_store
    from guardrag.faces.service import Guardrag, build_services

    faq = tmp_path / "faq.jsonl"  # a slice of the sample KB: embedding all of it takes long
    faq.write_text("".join(SAMPLE_FAQ.read_text().splitlines(keepends=True)[:24]))
    settings = Settings(data_dir=tmp_path / "data", default_kb=KB)
    store = open_store(settings.data_dir, None, None)
    ingest(store, embedder, KB, [faq], description="Kinetic Wallet")
    bot = Guardrag(
        build_services(settings, store=store, embedder=embedder, chat_model=ScriptedChatModel()),
        settings,
    )
    sink = sink_factory()
    question = "How do I sign up for Kinetic Wallet?"
    result = bot.ask(question, KB)
    assert result.citations[0].source_id == "kw-account-001"
    sink.record(
        result,
        kb=KB,
        models=bot.services.model_names(),
        snapshot_id=bot.services.snapshot_id(KB),
    )
    assert sink.flush()
    audit = SQLiteAuditStore(db)

    unchanged = replay(audit, result.request_id, bot)
    assert unchanged.same, unchanged.render()
    assert unchanged.replayed.snapshot_id == unchanged.original.snapshot_id is not None

    rows = [json.loads(line) for line in faq.read_text().splitlines()]
    for row in rows:
        if row.get("id") == "kw-account-001":
            row["answer"] = "Sign-ups are paused until further notice."
    faq.write_text("".join(json.dumps(row) + "\n" for row in rows))
    ingest(store, embedder, KB, [faq], description="Kinetic Wallet")

    changed = replay(audit, result.request_id, bot)
    assert not changed.same
    assert "answer" in {c.field for c in changed.changes}
    assert "snapshot_id" in {c.field for c in changed.context}
    assert "Sign-ups are paused" in changed.render()
    audit.close()
    bot.close()

    # The command builds its own Guardrag from settings (the index lock is free again).
    code, out = invoke(settings.data_dir, "replay", result.request_id[:8], audit_url=str(db))
    assert code == 1 and "Sign-ups are paused" in out, out


def test_settings_accept_audit_urls() -> None:
    assert Settings(audit_url="postgresql://u@h/db").audit_url == "postgresql://u@h/db"
    assert Settings(audit_url="").audit_url is None
    with pytest.raises(ValueError, match="GUARDRAG_AUDIT_URL"):
        Settings(audit_url="mysql://nope")


def test_postgres_store_reconnects_after_a_server_restart(
    postgres: TempPostgres, postgres_url: str
) -> None:
    store = open_audit_store(postgres_url)
    assert isinstance(store, PostgresAuditStore)
    store.write([build_record(make_result(1), kb=KB)])
    # What a failover or restart does to an open connection: the server ends it.
    backend = store.query("SELECT pg_backend_pid()")[0][0]
    with psycopg.connect(postgres.url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
    with pytest.raises(psycopg.OperationalError):
        store.count()  # the statement that finds the connection dead fails (the sink spools)
    store.write([build_record(make_result(2), kb=KB)])  # the next one reconnects
    assert store.count() == 2
    store.close()
