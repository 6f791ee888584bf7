"""Services the nodes use, injected through LangGraph's runtime context (never imported globals)."""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel

from guardrag.core.classify import DomainClassifier
from guardrag.core.embedder import Embedder
from guardrag.core.guards import InputGuard, OutputGuard
from guardrag.core.kb.stats import KBStatsCache
from guardrag.core.rerank import Reranker
from guardrag.core.second_opinion import SecondOpinion
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
    second_opinion: SecondOpinion | None = None  # rerank's, on unsure rankings (when installed)

    def model_names(self) -> dict[str, str | None]:
        """The models behind a run (for the audit log): chat (None when unset), embedder,
        reranker and second opinion (None when not installed)."""
        return {
            "chat": self.model_name if self.chat_model is not None else None,
            "embedder": str(getattr(self.embedder, "model_name", type(self.embedder).__name__)),
            "reranker": self.reranker.name,
            "second_opinion": self.second_opinion.name if self.second_opinion else None,
        }

    def snapshot_id(self, kb: str) -> str | None:
        """The KB snapshot the last run saw, when its statistics are loaded."""
        stats = self.kb_stats.peek(kb)
        return stats.snapshot_id if stats is not None else None
