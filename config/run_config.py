"""Per-run knobs: thresholds, top-k, switches and model choices.

Read from `config["configurable"]` on every graph run, so a notebook, a test or an A/B run can
override any of them for one call without touching process settings. Every value is checked
(type and range); a knob that does not exist is an error naming it, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from guardrag.contract import GuardragError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


#: The verbatim-answer threshold of a KB that has no calibration of its own (fitted on our
#: e-wallet golden set; self-calibration puts that KB at 0.46).
DEFAULT_FAQ_ANSWER_THRESHOLD = 0.45


class KnobError(GuardragError, ValueError):
    """A knob that does not exist, or a value out of its range; the message names the knob."""


#: A similarity, score, share, ratio or the difference of two: they lie in [-1, 1]; a threshold
#: above 1 switches its rule off (tests and A/B runs do).
Unit = Annotated[float, Field(ge=-1.0, le=2.0)]
Count = Annotated[int, Field(ge=1)]


def _knob(default: Any, description: str, **bounds: Any) -> Any:
    return Field(default=default, description=description, **bounds)


class RunConfig(BaseModel):
    """Documented knobs of one pipeline run. Defaults are calibrated on the golden sets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # moderate_input
    max_input_chars: Count = _knob(2000, "Questions longer than this are refused input_too_long.")
    # classify
    domain_min_similarity: Unit = _knob(
        0.34, "Best cosine to any KB entry below which a question is out of domain."
    )
    domain_margin: Unit = _knob(
        0.02, "How much closer to the KB than to generic off-topic exemplars a question must be."
    )
    domain_confident_similarity: Unit = _knob(
        0.45,
        "Below this best cosine to the KB, a question for which rerank finds nothing relevant "
        "is refused out_of_domain (it was only loosely related) rather than no_relevant_docs.",
    )
    greeting_min_similarity: Unit = _knob(
        0.62, "Cosine to a greeting/small-talk exemplar above which a question is small talk."
    )
    # exact_match
    exact_match: bool = _knob(True, "Answer verbatim when the question equals an FAQ question.")
    # retrieve
    use_bm25: bool = _knob(True, "Hybrid dense + BM25 retrieval (RRF); off means dense only.")
    top_k: Count = _knob(10, "Candidates retrieved before rerank.")
    # rerank
    rerank: bool = _knob(True, "Rescore candidates with the reranker; off keeps fusion order.")
    min_relevance: Unit = _knob(
        0.35, "Rerank score of the best candidate below which nothing relevant was found."
    )
    min_evidence_coverage: Unit = _knob(
        0.3,
        "Share of the question's IDF-weighted words the passages must contain before an LLM "
        "is asked (unless the best passage is semantically very close, see strong_semantic).",
    )
    strong_semantic: Unit = _knob(
        0.7, "Semantic similarity of the best passage that counts as evidence on its own."
    )
    faq_answer_threshold: Unit | None = _knob(
        None,
        "Rerank score above which one FAQ entry is answered verbatim (no LLM). None: the KB's "
        "own, calibrated at ingest on its entries (`guardrag kbs` shows it); "
        f"{DEFAULT_FAQ_ANSWER_THRESHOLD} for a KB without one.",
    )
    faq_margin: Unit = _knob(
        0.09, "Lead over the runner-up entry needed to answer an FAQ entry verbatim."
    )
    second_opinion: bool = _knob(
        False,
        "Ask the second-opinion embedder (all-mpnet-base-v2, when installed) about an FAQ entry "
        "at or above the verbatim threshold but within faq_margin of its rival: answered "
        "verbatim when it too ranks the entry first by faq_margin. Off by default: about one "
        "in four of those answers was wrong on the fitting sets (docs/RESULTS.md, 'The "
        "second opinion settles a close lead').",
    )
    max_passages: Count = _knob(
        3, "Most passages handed to the LLM (each costs prompt time; docs/RESULTS.md)."
    )
    passage_min_ratio: Unit = _knob(
        0.8, "Passages scoring below this share of the best score are not given to the LLM."
    )
    # rephrase
    rephrase_unsure: bool = _knob(
        True,
        "Ask the chat model to rephrase a question the domain gate refuses on similarity alone, "
        "or whose best FAQ entry is not confident, and search again with the rewrite.",
    )
    rephrase_margin: Unit = _knob(
        0.15,
        "An unsure FAQ entry is answered verbatim when the question and its rephrasing both rank "
        "it first, their average score clears the verbatim threshold and leads by this much "
        "(chosen on the tuning sets by right answers - 5 x wrong ones).",
    )
    faq_generation: Literal["always", "agreed", "never"] = _knob(
        "never",
        "An FAQ question no entry answers with confidence: 'never' offers the closest entries "
        "as choices (or refuses low_confidence), so every FAQ answer is an entry's own text; "
        "'agreed' lets the chat model write from the passages when the question and its "
        "rephrasing rank the same entry first (a question of several parts: always); 'always' "
        "lets it write regardless. Document KBs are always generated (docs/RESULTS.md, 'Free "
        "answers from one FAQ entry').",
    )
    # generate
    use_llm: bool = _knob(True, "Generate answers with the chat model when no FAQ entry fits.")
    max_answer_tokens: Count = _knob(
        120,
        "Completion token budget (the prompt asks for 4 sentences); a draft cut by it keeps "
        "its whole sentences.",
    )
    context_token_budget: Count = _knob(1500, "Token budget for passages in the prompt.")
    # ground
    grounding_min_similarity: Unit = _knob(
        0.5,
        "Minimum cosine between a claim and its best source unit, chosen between what correct "
        "and unsupported claims score (`scripts/score_grounding.py --sweep`, docs/RESULTS.md).",
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
    answer_judge: bool = _knob(
        False,
        "Ask the chat model, before a quote or a grounded draft over document passages is "
        "served, whether its text states what the question asks for (P(YES) >= 0.5), and refuse "
        "no_relevant_docs when it says no. Off by default: the bundled 1.5B model tends to "
        "answer a yes/no question itself ('does X need Y?' -> NO) instead of judging the "
        "passage, and so refuses right quotes.",
    )

    @classmethod
    def from_runnable_config(cls, config: RunnableConfig | None = None) -> RunConfig:
        """The knobs in `config["configurable"]`; other keys there (thread_id, LangGraph's own)
        are not knobs and are ignored. Validated once per distinct set of values."""
        configurable = (config or {}).get("configurable") or {}
        return _validated(tuple(sorted((k, v) for k, v in configurable.items() if k in KNOBS)))

    @classmethod
    def checked(cls, knobs: Mapping[str, Any] | None) -> RunConfig:
        """Knobs from a caller: an unknown name or a bad value raises KnobError naming it."""
        try:
            return cls.model_validate(dict(knobs or {}))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'knobs'}: "
                + ("no such knob" if e["type"] == "extra_forbidden" else e["msg"])
                for e in exc.errors()
            )
            raise KnobError(f"invalid knobs: {problems}") from None

    @classmethod
    def parse(cls, items: Iterable[str]) -> dict[str, Any]:
        """`name=value` overrides (values read as JSON, else strings), checked: KnobError names
        the first bad one."""
        knobs: dict[str, Any] = {}
        for item in items:
            name, sep, raw = item.partition("=")
            if not sep or name not in KNOBS:
                raise KnobError(
                    f"{item!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(KNOBS))}"
                )
            try:
                knobs[name] = json.loads(raw)
            except json.JSONDecodeError:
                knobs[name] = raw
        cls.checked(knobs)
        return knobs

    @classmethod
    def describe(cls) -> dict[str, tuple[Any, str]]:
        """{knob: (default, description)} for docs and `guardrag --help`."""
        return {name: (f.default, f.description or "") for name, f in cls.model_fields.items()}


KNOBS = frozenset(RunConfig.model_fields)


@lru_cache(maxsize=256)
def _validated(items: tuple[tuple[str, Any], ...]) -> RunConfig:
    return RunConfig.checked(dict(items))
