"""The README stays the front door: every setting and every refusal reason is documented."""

from __future__ import annotations

from pathlib import Path

from guardrag.config.settings import describe_settings
from guardrag.contract import RefusalReason

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_in_the_readme() -> None:
    missing = [name for name, _ in describe_settings() if f"`{name}`" not in README]
    assert not missing, f"add to README.md: {missing}"


def test_every_refusal_reason_is_in_the_readme() -> None:
    missing = [r.value for r in RefusalReason if f"`{r.value}`" not in README]
    assert not missing, f"add to README.md: {missing}"


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "make test" in README and "make test" in ci


def test_every_path_the_readme_names_exists() -> None:
    """The stage table and the floors point a newcomer at files: they must be there."""
    import re

    root = Path(__file__).resolve().parents[1]
    named = set(
        re.findall(r"`((?:guardrag|config|graph|nodes|tests|scripts|docs)/[\w/.]*)`", README)
    )
    missing = sorted(p for p in named if not (root / p).exists())
    assert not missing, f"README.md names files that do not exist: {missing}"
