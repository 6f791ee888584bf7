"""langgraph.json names a graph factory LangGraph's server can load: no checkpointer of its own
(the server refuses one), question in, guardrag's result out, knobs from the run's config.
(`langgraph dev` itself needs its own virtual environment; the README says how it was run.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from guardrag.faces import studio
from guardrag.faces.service import Guardrag
from tests.test_api import ATTACK, TOP_UP

REPO = Path(__file__).resolve().parents[1]


def test_langgraph_json_names_the_factory() -> None:
    config = json.loads((REPO / "langgraph.json").read_text())
    path, _, name = config["graphs"]["guardrag"].partition(":")
    spec = importlib.util.spec_from_file_location("studio_by_path", REPO / path)
    assert spec is not None and spec.loader is not None and name == "make_graph"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # loaded by file path, as the server does
    assert callable(getattr(module, name))


def test_the_factory_graph_answers_without_a_checkpointer(
    bot: Guardrag, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(studio, "_bot", bot)
    graph = studio.make_graph()
    assert graph.checkpointer is None and graph.name == "guardrag"
    answered = graph.invoke({"question": TOP_UP})["result"]
    assert answered["outcome"] == "answered" and answered["route"] == "exact_match"
    refused = graph.invoke({"question": ATTACK, "kb": "kinetic"})["result"]
    assert refused["refusal"]["reason"] == "prompt_injection"
    knob = graph.invoke(
        {"question": TOP_UP}, {"configurable": {"exact_match": False, "thread_id": "ignored"}}
    )["result"]
    exact = next(d for d in knob["trail"] if d["node"] == "exact_match")
    assert exact["reason"] == "disabled"  # the run's knob reached the pipeline
