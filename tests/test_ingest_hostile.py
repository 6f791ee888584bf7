"""Hostile knowledge-base files: formula cells, script links, rows over the size limits and
nesting too deep are refused with their file and row, never a traceback (issue 20)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from guardrag.core.jsonl import read_objects
from guardrag.core.kb.entries import IngestError
from guardrag.core.kb.readers import IngestLimits, load_entries, unsafe_field
from guardrag.faces.cli.main import main

SMALL = IngestLimits(field_bytes=1_000, row_bytes=4_000, file_bytes=100_000, depth=4)


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_formula_cells_and_script_links_are_refused_with_their_row(tmp_path: Path) -> None:
    faq = tmp_path / "faq.csv"
    faq.write_text(
        "id,question,answer,url\n"
        'ok,How do I sign up?,"- Open the app\n- Tap Sign up",https://help.example/sign-up\n'
        "phone,How do I call you?,+60 3-1234 5678,\n"
        'f1,Claim?,"=HYPERLINK(""http://evil.example/steal"",""Claim here"")",\n'
        "f2,Sum?,@SUM(1+1)*cmd|' /C calc'!A0,\n"
        "f3,Dde?,-2+3+cmd|' /C calc'!A0,\n"
        "f4,Plus?,+HYPERLINK(1),\n"
        "u1,Link?,Fine.,javascript:alert(1)\n"
        "u2,Inline?,See [here](javascript:alert(1)),\n"
        'u3,Data?,Fine.,"data:text/html;base64,PHNjcmlwdD4="\n'
    )
    entries, skipped = load_entries([faq], skip_bad_rows=True, limits=SMALL)
    assert [e.source_id for e in entries] == ["ok", "phone"]
    located = {line.split(": ", 1)[0].rsplit(":", 1)[1] for line in skipped}
    assert located == {
        "5",
        "6",
        "7",
        "8",
        "9",
        "10",
        "11",
    }  # the rows as a spreadsheet numbers them
    assert all(str(faq) in line for line in skipped)
    assert sum("spreadsheet formula" in line for line in skipped) == 4
    assert sum("http(s) link" in line for line in skipped) == 2
    assert any("runs a script ('](javascript:')" in line for line in skipped)
    with pytest.raises(IngestError, match=r"faq.csv:5: field 'answer' starts like a spreadsheet"):
        load_entries([faq], limits=SMALL)  # without --skip-bad-rows nothing is ingested


def test_prose_that_mentions_a_script_scheme_is_kept_a_link_to_one_is_refused(
    tmp_path: Path,
) -> None:
    """A tech-support FAQ explains bookmarklets in prose; only a real link target is hostile."""
    prose = (
        "A bookmarklet is a bookmark whose address starts with javascript: instead of http:; "
        "drag it to your bookmarks bar."
    )
    assert unsafe_field("answer", prose) is None
    faq = tmp_path / "faq.jsonl"
    rows = [
        {"id": "b1", "question": "What is a bookmarklet?", "answer": prose},
        {"id": "b2", "question": "Where?", "answer": "Click [here](javascript:alert(1))."},
    ]
    faq.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(IngestError, match=r"faq.jsonl:2: field 'answer' holds a link that runs"):
        load_entries([faq], limits=SMALL)
    faq.write_text(json.dumps(rows[0]) + "\n")
    entries, _ = load_entries([faq], limits=SMALL)
    assert [e.source_id for e in entries] == ["b1"]
    for link in (
        "See [this](javascript:alert(1))",
        "See [this]( JavaScript:alert(1))",
        "<javascript:alert(1)>",
        '<a href="javascript:alert(1)">here</a>',
        "<img src='data:text/html;base64,PHNjcmlwdD4='>",
    ):
        assert unsafe_field("answer", link) is not None, link


def test_prose_that_merely_starts_with_a_sign_is_kept() -> None:
    for text in ("- step one", "+60 12-345 6789", "@kineticwallet on X", "-5% off", "+ RM5 fee"):
        assert unsafe_field("answer", text) is None, text
    assert unsafe_field("url", "HTTPS://help.example/a") is None
    assert unsafe_field("url", "ftp://x.example/") and unsafe_field("url", "/relative")


def test_rows_over_the_limits_are_refused_by_name(tmp_path: Path) -> None:
    rows: list[object] = [
        {"id": "ok", "question": "Fine?", "answer": "Yes."},
        {"id": "field", "question": "Big?", "answer": "x" * 2_000},
        {"id": "row", "question": "Wide?", "answer": "y", **{f"c{n}": "z" * 900 for n in range(5)}},
        {"id": "deep", "question": "Deep?", "answer": "a", "x": [[[[["too deep"]]]]]},
    ]
    path = _jsonl(tmp_path / "rows.jsonl", rows)
    path.write_text(path.read_text() + "[" * 1_500 + "]" * 1_500 + "\n")  # past the parser
    entries, skipped = load_entries([path], skip_bad_rows=True, limits=SMALL)
    assert [e.source_id for e in entries] == ["ok"]
    assert [s.split(": ", 1)[0].rsplit(":", 1)[1] for s in skipped] == ["2", "3", "4", "5"]
    assert "field 'answer' is 2000 bytes, over the limit of 1000" in skipped[0]
    assert "GUARDRAG_INGEST_MAX_ROW_BYTES" in skipped[1]
    assert "nests deeper than 4 levels" in skipped[2] and "nests deeper" in skipped[3]

    huge = _jsonl(tmp_path / "huge.jsonl", [{"question": "Q?", "answer": "x" * 10_000_000}])
    with pytest.raises(IngestError, match=r"huge.jsonl:1: row is \d+ bytes, over the limit"):
        load_entries([huge])  # the process settings' limits (256 KiB a row): refused by size
    with pytest.raises(IngestError, match=r"file is \d+ bytes, over the limit of 100000"):
        load_entries([huge], limits=SMALL)


def test_a_deep_json_array_file_is_a_located_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(IngestError, match=r"deep\.json: nested deeper than"):
        load_entries([deep])


def test_cli_names_problems_and_never_shows_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GUARDRAG_DATA_DIR", str(tmp_path / "data"))
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    formula = _jsonl(tmp_path / "f.jsonl", [{"question": "Q?", "answer": "=1+1"}])
    for args, message in (
        (["ingest", str(deep), "--kb", "x"], "deep.jsonl:1: row nests deeper than 16 levels"),
        (["ingest", str(formula), "--kb", "x"], "f.jsonl:1: field 'answer' starts like a"),
        (["ingest", str(formula), "--kb", ""], "--kb: knowledge base name '' is not valid"),
        (["ingest", str(formula), "--kb", "kínetic"], "--kb: knowledge base name 'kínetic'"),
        (["ask", "hi", "--kb", ""], "--kb: knowledge base name '' is not valid"),
    ):
        monkeypatch.setattr(sys, "argv", ["guardrag", *args])
        with pytest.raises(SystemExit) as done:
            main()  # the console entry point, as `guardrag` runs it
        out = capsys.readouterr()
        assert done.value.code == 2, (args, out)
        assert message in out.err and "Traceback" not in out.err + out.out, out
        assert "stays up" not in out.err, out  # no model server started for a bad argument


def test_batch_input_nested_too_deeply_is_a_skipped_row(tmp_path: Path) -> None:
    rows = tmp_path / "in.jsonl"
    rows.write_text('{"question": "ok?"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    assert list(read_objects(rows)) == [
        (1, {"question": "ok?"}),
        (2, f"{rows}:2: JSON nested too deeply"),
    ]
