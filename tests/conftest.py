"""Shared fixtures: the real embedder and a real (local-mode) Qdrant with the sample KB."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from guardrag.config.settings import Settings
from guardrag.core.embedder import OnnxEmbedder
from guardrag.core.kb.ingest import ingest
from guardrag.core.store import VectorStore
from guardrag.core.store.server import ServerStore
from tests.fakes import ScriptedChatModel

if TYPE_CHECKING:
    from guardrag.core.guards.shared.learned import SecondReader
    from guardrag.faces.service import Guardrag

# Throwaway PostgreSQL and Redis servers (fixtures `postgres`, `postgres_url`, `redis_url`).
pytest_plugins = ["tests.servers"]

REPO = Path(__file__).resolve().parents[1]
SAMPLE_FAQ = REPO / "datasets" / "ewallet" / "faq.jsonl"
SHARED_DATA = Path(os.environ.get("GUARDRAG_SHARED_DATA", REPO.parent / "shared" / "data"))
KB = "kinetic"
#: The chat model may write an answer from an unsure FAQ entry (by default the entries are offered).
WRITES_FAQ = {"faq_generation": "agreed"}


@pytest.fixture(scope="session")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder()


@pytest.fixture(scope="session")
def sample_store(embedder: OnnxEmbedder) -> Iterator[VectorStore]:
    """The sample KB in qdrant-client's in-process mode: the real Qdrant API, no server."""
    store = ServerStore(location=":memory:")
    ingest(
        store,
        embedder,
        KB,
        [SAMPLE_FAQ],
        description="Kinetic Wallet",
        fallback_url="https://help.kineticwallet.example/",
    )
    yield store
    store.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """No second opinion, wherever the model dir points: tests that want it pass one."""
    return Settings(data_dir=tmp_path, default_kb=KB, second_opinion=False)


@pytest.fixture
def chat() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def bot(
    settings: Settings, sample_store: VectorStore, embedder: OnnxEmbedder, chat: ScriptedChatModel
) -> Guardrag:
    """The real pipeline over the sample KB, with a scripted chat model."""
    from guardrag.faces.service import Guardrag, build_services

    return Guardrag(
        build_services(settings, store=sample_store, embedder=embedder, chat_model=chat), settings
    )


@pytest.fixture(scope="session")
def real_reader() -> SecondReader:
    """The injection classifier's second reader over the installed MPNet (skips, or fails
    under REQUIRE_MODEL, when it is not installed)."""
    from guardrag.core.guards.shared.learned import installed_reader
    from guardrag.core.mpnet import model_dir, model_problem
    from tests.real_model import REQUIRE_MODEL, installed_model

    settings = installed_model()
    if problem := model_problem(model_dir(settings)):
        if REQUIRE_MODEL:
            pytest.fail(problem)
        pytest.skip(problem)
    reader = installed_reader(settings)
    assert reader is not None
    return reader


def shared(*parts: str) -> Path:
    """A file under ../shared/data, or skip the test when that folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path
