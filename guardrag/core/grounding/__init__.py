"""Claim-level grounding: is every claim of a generated answer supported by its passages?

claims.py judges (meaning, wording, then the hard checks of checks.py: numbers, names,
negation, conditions); split.py cuts an answer into claims; evidence.py prepares passages;
numbers.py, entities.py and lexicon.py read facts and words; judge.py lets a strong model
judge paraphrases; drafts.py checks a draft's hygiene and prunes unsupported remarks.
"""

from guardrag.core.grounding.claims import (
    DEFAULT_MIN_OVERLAP,
    DEFAULT_MIN_SIMILARITY,
    check_grounding,
    drawn_on,
    summarise,
)
from guardrag.core.grounding.entities import extract_entities
from guardrag.core.grounding.lexicon import bound_words, content_words, negation_cues
from guardrag.core.grounding.numbers import extract_mentions
from guardrag.core.grounding.report import ClaimSupport, GroundingReport, Passage
from guardrag.core.grounding.split import (
    CITATION_RE,
    parse_citations,
    split_claims,
    split_sentences,
)

__all__ = [
    "CITATION_RE",
    "DEFAULT_MIN_OVERLAP",
    "DEFAULT_MIN_SIMILARITY",
    "ClaimSupport",
    "GroundingReport",
    "Passage",
    "bound_words",
    "check_grounding",
    "content_words",
    "drawn_on",
    "extract_entities",
    "extract_mentions",
    "negation_cues",
    "parse_citations",
    "split_claims",
    "split_sentences",
    "summarise",
]
