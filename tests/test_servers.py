"""The throwaway servers' rule for a missing binary: skip while working, fail where the
servers are required (`make test` sets GUARDRAG_REQUIRE_SERVICES=1; CI sets CI)."""

from __future__ import annotations

import pytest

from tests.servers import missing, required


@pytest.mark.parametrize(
    ("require", "ci", "fails"),
    [
        (None, None, False),
        (None, "", False),
        (None, "false", False),
        (None, "0", False),
        (None, "true", True),
        (None, "1", True),
        ("1", None, True),
        ("0", None, False),
    ],
)
def test_a_missing_server_fails_only_where_required(
    monkeypatch: pytest.MonkeyPatch, require: str | None, ci: str | None, fails: bool
) -> None:
    for name, value in (("GUARDRAG_REQUIRE_SERVICES", require), ("CI", ci)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert required() is fails
    outcome = pytest.fail.Exception if fails else pytest.skip.Exception
    with pytest.raises(outcome, match="redis-server not found: run `make services`"):
        missing("redis-server")
