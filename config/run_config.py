"""Per-run knobs: thresholds, top-k, switches and model choices.

Read from `config["configurable"]` on every graph run, so a notebook, a test or an A/B run can
override any of them for one call without touching process settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from langchain_core.runnables import RunnableConfig


def _knob(default: Any, description: str) -> Any:
    return field(default=default, metadata={"description": description})


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Documented knobs of one pipeline run. Defaults are calibrated on the golden sets."""

    # moderate_input
    max_input_chars: int = _knob(2000, "Questions longer than this are refused input_too_long.")
    # classify
    domain_min_similarity: float = _knob(
        0.34, "Best cosine to any KB entry below which a question is out of domain."
    )
    domain_margin: float = _knob(
        0.02, "How much closer to the KB than to generic off-topic exemplars a question must be."
    )
    domain_confident_similarity: float = _knob(
        0.45,
        "Below this best cosine to the KB, a question for which rerank finds nothing relevant "
        "is refused out_of_domain (it was only loosely related) rather than no_relevant_docs.",
    )
    greeting_min_similarity: float = _knob(
        0.62, "Cosine to a greeting/small-talk exemplar above which a question is small talk."
    )
    # exact_match
    exact_match: bool = _knob(True, "Answer verbatim when the question equals an FAQ question.")
    # retrieve
    use_bm25: bool = _knob(True, "Hybrid dense + BM25 retrieval (RRF); off means dense only.")
    top_k: int = _knob(10, "Candidates retrieved before rerank.")
    # rerank
    rerank: bool = _knob(True, "Rescore candidates with the reranker; off keeps fusion order.")
    min_relevance: float = _knob(
        0.35, "Rerank score of the best candidate below which nothing relevant was found."
    )
    min_evidence_coverage: float = _knob(
        0.3,
        "Share of the question's IDF-weighted words the passages must contain before an LLM "
        "is asked (unless the best passage is semantically very close, see strong_semantic).",
    )
    strong_semantic: float = _knob(
        0.7, "Semantic similarity of the best passage that counts as evidence on its own."
    )
    faq_answer_threshold: float = _knob(
        0.45, "Rerank score above which one FAQ entry is answered verbatim (no LLM)."
    )
    faq_margin: float = _knob(
        0.09, "Lead over the runner-up entry needed to answer an FAQ entry verbatim."
    )
    max_passages: int = _knob(
        3, "Most passages handed to the LLM (rerank recall@3 is 0.96; each costs prompt time)."
    )
    passage_min_ratio: float = _knob(
        0.8, "Passages scoring below this share of the best score are not given to the LLM."
    )
    # generate
    use_llm: bool = _knob(True, "Generate answers with the chat model when no FAQ entry fits.")
    max_answer_tokens: int = _knob(
        200, "Completion token budget (the prompt asks for 4 sentences)."
    )
    context_token_budget: int = _knob(1500, "Token budget for passages in the prompt.")
    # ground
    grounding_min_similarity: float = _knob(
        0.0, "Minimum claim-to-source cosine (0 keeps the grounding module's calibrated default)."
    )
    grounding_fallback_to_faq: bool = _knob(
        True,
        "When an answer is not grounded but one KB entry (FAQ answer or document passage) "
        "clearly leads the ranking, or the draft drew on the top document passage, answer with "
        "it verbatim.",
    )
    grounding_judge: bool = _knob(
        False,
        "Let the chat model judge each claim against its passage instead of the similarity and "
        "overlap thresholds (numbers, entities, negation and citations stay rule-checked). "
        "For strong models only: a small local model judges worse than the rules.",
    )

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None = None) -> RunConfig:
        """Build from `config["configurable"]`, ignoring keys that are not knobs (thread_id...)."""
        configurable = (config or {}).get("configurable") or {}
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in configurable.items() if k in names})

    @classmethod
    def describe(cls) -> dict[str, tuple[Any, str]]:
        """{knob: (default, description)} for docs and `guardrag config`."""
        return {f.name: (f.default, f.metadata["description"]) for f in fields(cls)}
