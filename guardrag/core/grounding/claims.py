"""Claim-level grounding: is every claim of a generated answer supported by the passages it cites?

No NLI model ships offline, so support is decided on four kinds of evidence, per claim:

1. meaning: cosine similarity (MiniLM) between the claim and its best-matching source unit
   (a sentence, a whole passage, or the cited passages together);
2. wording: the share of the claim's content words (lowercased, lightly stemmed) found in that unit;
3. hard facts: every amount, percentage, period, time and date in the claim appears with the same
   value (and unit, and frequency) in the cited passages, and is not stated there with another
   value for the same thing; every named entity / product / acronym appears there too;
4. polarity: the claim and the source sentence it matches agree on negation (can / cannot).

A claim passes only if all four hold. Filler ("Here is what I found:") is ignored, but only when it
carries no content word, number or entity, so filler cannot smuggle a fact past the check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from guardrag.config.run_config import RunConfig
from guardrag.core.embedder import Embedder
from guardrag.core.grounding import checks
from guardrag.core.grounding.evidence import Source, Unit, cite_label, prepare, unit_vector, units
from guardrag.core.grounding.lexicon import content_words, negation_cues
from guardrag.core.grounding.report import ClaimSupport, GroundingReport, Passage
from guardrag.core.grounding.split import (
    embed_text,
    is_filler,
    is_lead_in,
    is_question,
    split_claims,
)

#: Cosine similarity between a claim and its best source unit: the run knob's default (its
#: calibration is described there).
DEFAULT_MIN_SIMILARITY: float = RunConfig.model_fields["grounding_min_similarity"].default

#: Share of the claim's content words present in the source unit. The sharpest knee: correct
#: paraphrases keep >= 0.6 of them, invented details ("instant", "airline miles") fall to <= 0.5;
#: 0.5 lets one through, 0.7 rejects 4% of correct answers.
DEFAULT_MIN_OVERLAP = 0.6

#: Texts per embedding call (sorted by length); smaller batches waste less padding.
EMBED_BATCH = 8


@dataclass(frozen=True)
class _Thresholds:
    min_similarity: float
    min_overlap: float


def _judge(
    claim: str,
    cited: tuple[int, ...],
    sources: Sequence[Source],
    vectors: dict[str, np.ndarray],
    limits: _Thresholds,
    facts_only: bool,
) -> tuple[ClaimSupport, float]:
    """Judge one claim against one candidate set of passages (its citations, or one passage).

    Returns the verdict and how close it came (to pick the most telling failure to report).
    """
    words = content_words(claim)
    claim_vec = vectors[embed_text(claim)]
    sentence_sim = {x: float(claim_vec @ vectors[x]) for s in sources for x in s.sentences}
    number_problem = checks.number_problem(claim, sources, sentence_sim)
    entity_problem = checks.entity_problem(claim, sources)
    scope_problem = "" if facts_only else checks.scope_problem(claim, sources, sentence_sim)
    negations = negation_cues(embed_text(claim))
    negation_problem = "" if facts_only else checks.negation_problem(
        words, negations, sources, sentence_sim, limits.min_similarity
    )  # fmt: skip

    best: tuple[float, float, float, Unit] | None = None  # rank, similarity, overlap, unit
    for unit in units(sources):
        sim = float(claim_vec @ unit_vector(unit, vectors))
        overlap = len(words & unit.words) / len(words) if words else 1.0
        passes = sim >= limits.min_similarity and overlap >= limits.min_overlap
        closeness = min(
            sim / max(limits.min_similarity, 1e-6), overlap / max(limits.min_overlap, 1e-6), 1.0
        )
        rank = (2.0 if passes else 0.0) + closeness + sim * 1e-3  # ties go to meaning
        if best is None or rank > best[0]:
            best = (rank, sim, overlap, unit)
    assert best is not None  # every passage yields at least one sentence
    rank, sim, overlap, unit = best
    matched = rank >= 2.0
    if matched and not negation_problem and len(unit.sentences) > 1 and not facts_only:
        negation_problem = checks.unit_negation_problem(words, negations, unit, sentence_sim)
    in_passage = max(
        ((sentence_sim[x], s.passage.number) for s in sources for x in s.sentences
         if s.passage.number in unit.numbers),
    )[1]  # fmt: skip
    label = cite_label(unit.numbers)
    factual = number_problem or entity_problem or scope_problem  # numbers, names, scope
    if factual or negation_problem:
        reason = factual or negation_problem
    elif facts_only:
        reason = "lead-in or question: only its numbers and entities are checked"
    elif matched:
        reason = f"supported by passage {label}"
    elif sim < limits.min_similarity:
        reason = f"similarity {sim:.2f} < {limits.min_similarity:.2f} to passage {label}"
    else:
        missing = ", ".join(sorted(words - unit.words)[:5])
        reason = (
            f"overlap {overlap:.2f} < {limits.min_overlap:.2f} with passage {label}"
            f" (missing: {missing})"
        )
    supported = not (factual or negation_problem) and (facts_only or matched)
    support = ClaimSupport(
        claim=claim,
        cited=cited,
        best_passage=in_passage,
        similarity=round(sim, 4),
        overlap=round(overlap, 4),
        numbers_ok=not (number_problem or scope_problem),  # a figure moved to another scope
        entities_ok=not entity_problem,
        supported=supported,
        reason=reason,
        facts_only=facts_only,
    )
    return support, rank - (1.0 if factual else 0.0)


def _judge_claim(
    text: str,
    cites: tuple[int, ...],
    by_number: dict[int, Source],
    vectors: dict[str, np.ndarray],
    limits: _Thresholds,
    facts_only: bool,
    require_citations: bool,
) -> ClaimSupport:
    """Judge against the cited passages together, or (uncited) against each passage alone."""

    def fail(reason: str) -> ClaimSupport:
        return ClaimSupport(text, cites, None, 0.0, 0.0, False, False, False, reason)

    missing = [n for n in cites if n not in by_number]
    if missing:
        return fail(f"cites missing passage {cite_label(missing)}")
    if not cites and require_citations and not facts_only:
        return fail("no citation")
    if not by_number:
        return fail("no passages given")
    candidates = [[by_number[n] for n in cites]] if cites else [[s] for s in by_number.values()]
    judged = [_judge(text, cites, c, vectors, limits, facts_only) for c in candidates]
    chosen = next((j for j, _ in judged if j.supported), None)
    if chosen is None:
        chosen = max(judged, key=lambda x: x[1])[0]
    # "free" must hold against every passage given, not only the one that supports it
    problem = "" if facts_only else checks.omitted_fee_problem(text, list(by_number.values()))
    if chosen.supported and problem:  # an amount's condition dropped: no judge may overrule it
        chosen = replace(
            chosen, supported=False, numbers_ok=False, reason=f"claim not supported ({problem})"
        )
    if not cites:  # say so in the trail: uncited claims are matched against every passage
        prefix = "uncited, " if chosen.supported else "uncited; "
        chosen = replace(chosen, reason=prefix + chosen.reason)
    return chosen


def _embed_all(embedder: Embedder, texts: set[str]) -> dict[str, np.ndarray]:
    """Embed in small batches of similar length: a batch is padded to its longest text, so one
    long FAQ sentence in a large batch slows the whole check down."""
    ordered = sorted(texts, key=len)
    vectors: dict[str, np.ndarray] = {}
    for i in range(0, len(ordered), EMBED_BATCH):
        batch = ordered[i : i + EMBED_BATCH]
        vectors.update(zip(batch, embedder.embed(batch), strict=True))
    return vectors


def check_grounding(
    answer: str,
    passages: Sequence[Passage],
    embedder: Embedder,
    *,
    min_similarity: float = DEFAULT_MIN_SIMILARITY,
    min_overlap: float = DEFAULT_MIN_OVERLAP,
    require_citations: bool = False,
) -> GroundingReport:
    """Decide whether `answer` is supported by `passages`, claim by claim.

    Supported iff every citation names a given passage, at least one claim was judged, and every
    claim is supported by the passages it cites (an uncited claim by any one passage; with
    `require_citations` an uncited claim fails). One embedding call: claims and source sentences.
    """
    by_number = {p.number: prepare(p) for p in passages}
    raw_claims = split_claims(answer)
    invalid = tuple(sorted({n for _, cites in raw_claims for n in cites if n not in by_number}))

    judged: list[tuple[str, tuple[int, ...], bool]] = []  # claim, cites, facts_only
    ignored: list[str] = []
    for text, cites in raw_claims:
        if not text:
            continue
        # a lead-in or a question answers nothing: its facts must hold, but it is no claim
        facts_only = is_lead_in(text) or is_question(text)
        if is_filler(text) or facts_only:
            ignored.append(text)
        if not is_filler(text):
            judged.append((text, cites, facts_only))

    texts = {embed_text(c) for c, _, _ in judged}
    texts.update(x for src in by_number.values() for x in src.sentences)
    vectors = _embed_all(embedder, texts)

    limits = _Thresholds(min_similarity, min_overlap)
    results = [
        _judge_claim(text, cites, by_number, vectors, limits, facts_only, require_citations)
        for text, cites, facts_only in judged
    ]
    return summarise(results, invalid, tuple(ignored))


def summarise(
    results: Sequence[ClaimSupport], invalid: tuple[int, ...], ignored: tuple[str, ...] = ()
) -> GroundingReport:
    """The report on an answer from the verdicts on its claims (and its invalid citations)."""
    factual = [c for c in results if not c.facts_only]
    failing = next((c for c in results if not c.supported), None)
    if invalid:
        reason = f"citation {cite_label(invalid)} refers to no given passage"
    elif failing is not None:
        reason = f"claim not supported ({failing.reason}): '{failing.claim}'"
    elif not factual:
        reason = "answer makes no checkable claim"
    else:
        reason = f"all {len(factual)} claims supported"
    supported = not invalid and bool(factual) and failing is None
    return GroundingReport(
        supported=supported,
        score=round(min(c.score for c in factual), 4) if supported else 0.0,
        claims=tuple(results),
        invalid_citations=invalid,
        reason=reason,
        ignored=ignored,
    )


#: Content words an uncited claim's supporting passage lacks that another passage must supply
#: for that passage to be cited too.
MIN_COMPLEMENT_WORDS = 2


def drawn_on(report: GroundingReport, passages: Sequence[Passage]) -> set[int]:
    """The passages the answer rests on: `cited_numbers()`, plus, for an uncited claim that
    combines passages ("clear, prominent warnings [1] help consumers understand losses [2]"),
    every other passage supplying at least MIN_COMPLEMENT_WORDS of the claim's content words
    that its supporting passage lacks."""
    numbers = report.cited_numbers()
    words_of = {p.number: content_words(p.text) for p in passages}
    for claim in report.claims:
        if not claim.supported or claim.cited or claim.best_passage is None:
            continue
        missing = content_words(claim.claim) - words_of.get(claim.best_passage, set())
        numbers.update(
            number
            for number, words in words_of.items()
            if number != claim.best_passage and len(missing & words) >= MIN_COMPLEMENT_WORDS
        )
    return numbers
