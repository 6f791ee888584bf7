"""Services the nodes use, injected through LangGraph's runtime context (never imported globals)."""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel

from guardrag.core.classify import DomainClassifier
from guardrag.core.embedder import Embedder
from guardrag.core.guards import InputGuard, OutputGuard
from guardrag.core.kb.stats import KBStatsCache
from guardrag.core.rerank import Reranker
from guardrag.core.store import VectorStore


@dataclass(frozen=True)
class Services:
    """One bundle per process, shared by the UI, CLI, batch and notebooks (built in service.py)."""

    store: VectorStore
    embedder: Embedder
    input_guard: InputGuard
    output_guard: OutputGuard
    domain: DomainClassifier
    reranker: Reranker
    kb_stats: KBStatsCache = field(default_factory=KBStatsCache)
    chat_model: BaseChatModel | None = None
    model_name: str = field(default="")
