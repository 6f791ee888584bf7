"""A question about a year the document never states is not answered by a figure of another
year: a drafted answer that drops the year, or a quote of the other year's sentence, is
refused with the year named in the trail (guardrag.core.grounding.kind.year_unstated)."""

from __future__ import annotations

from pathlib import Path

from guardrag.config.settings import Settings
from guardrag.contract import Result
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.grounding.kind import year_unstated
from guardrag.core.kb.ingest import ingest
from guardrag.core.store.server import ServerStore
from guardrag.faces.service import Guardrag, build_services
from tests.fakes import ScriptedChatModel

REPORT = """# Annual report

## Results

Net sales for fiscal 2022 were $5.2 billion, up from $4.8 billion in fiscal 2021. Operating
margin rose to 12 percent on lower freight costs.
"""


def test_a_year_the_source_never_states_is_named() -> None:
    assert year_unstated("What were net sales for fiscal 2024?", REPORT) == (
        "the question asks about 2024; the passage never states it"
    )
    assert year_unstated("What were net sales for fiscal 2022?", REPORT) is None
    assert year_unstated("What were net sales?", REPORT) is None


def _reasons(result: Result) -> str:
    return "\n".join(f"{d.node} {d.verdict} {d.reason}" for d in result.trail)


def test_a_figure_of_another_year_does_not_answer(
    settings: Settings, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    store = ServerStore(location=":memory:")
    report = tmp_path / "report.md"
    report.write_text(REPORT)
    ingest(store, embedder, "filings", [report], description="Annual report")
    chat = ScriptedChatModel()
    bot = Guardrag(
        build_services(settings, store=store, embedder=embedder, chat_model=chat), settings
    )
    try:
        chat.replies = ["The company reported net sales of $5.2 billion [1]."] * 2
        asked = bot.ask("What net sales did the company report for fiscal 2024?", "filings")
        assert asked.outcome == "refused", _reasons(asked)
        assert "the question asks about 2024" in _reasons(asked), _reasons(asked)
        chat.replies = ["Net sales for fiscal 2022 were $5.2 billion [1]."]
        stated = bot.ask("What net sales did the company report for fiscal 2022?", "filings")
        assert stated.outcome == "answered", _reasons(stated)
    finally:
        store.close()
