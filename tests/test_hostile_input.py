"""Property-based hostile input: the normaliser, the input guard and the ingest parsers never
crash or hang on arbitrary text, and huge inputs are refused early."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrag.contract import RefusalReason
from guardrag.core.guards import InputGuard, OutputGuard
from guardrag.core.kb.entries import IngestError
from guardrag.core.kb.readers import load_entries
from guardrag.core.text import content_words, normalise, question_key

GUARD = InputGuard(semantic=False)
OUTPUT = OutputGuard()
HOSTILE = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]), max_size=400
) | st.sampled_from(
    ["\u200b" * 300, "a" * 2000, "🙂" * 500, "1" * 1900, "\x00\x01\x02", "<|im_start|>" * 40]
)
QUICK = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@QUICK
@given(HOSTILE)
def test_text_normalisation_is_total(text: str) -> None:
    assert isinstance(normalise(text), str)
    assert isinstance(question_key(text), str)
    assert all(isinstance(w, str) and w for w in content_words(text))


@QUICK
@given(HOSTILE)
def test_input_guard_answers_quickly_for_any_text(text: str) -> None:
    started = time.perf_counter()
    finding = GUARD.check(text)
    assert time.perf_counter() - started < 1.0  # a per-request time bound, far above the p50
    assert finding is None or isinstance(finding.reason, RefusalReason)


@QUICK
@given(HOSTILE, st.lists(HOSTILE, max_size=3))
def test_output_guard_is_total(answer: str, sources: list[str]) -> None:
    OUTPUT.check(answer, sources, ["You are the help-centre assistant."])


def test_huge_input_is_refused_before_any_work() -> None:
    started = time.perf_counter()
    finding = GUARD.check("x" * 5_000_000)
    assert finding is not None and finding.reason is RefusalReason.INPUT_TOO_LONG
    assert time.perf_counter() - started < 0.5


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.binary(max_size=600),
    st.sampled_from([".json", ".jsonl", ".csv", ".md", ".txt", ".pdf", ".html", ".docx"]),
)
def test_ingest_parsers_fail_cleanly_on_garbage(tmp_path: Path, data: bytes, suffix: str) -> None:
    path = tmp_path / f"garbage{suffix}"
    path.write_bytes(data)
    try:
        entries, _ = load_entries([path], skip_bad_rows=True)
    except IngestError as exc:
        assert str(path) in str(exc)  # a clear, located message
    else:
        assert all(e.title and e.text for e in entries)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["id", "question", "answer", "url", "QUESTION"]),
            st.one_of(st.none(), st.integers(), HOSTILE),
            max_size=5,
        ),
        max_size=8,
    )
)
def test_ingest_rows_of_any_shape_are_kept_or_reported(
    tmp_path: Path, rows: list[dict[str, object]]
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    try:
        entries, skipped = load_entries([path], skip_bad_rows=True)
    except IngestError as exc:
        assert "no entries found" in str(exc)
    else:
        assert len(entries) + len(skipped) <= max(len(rows), 1) * 2
