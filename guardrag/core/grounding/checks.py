"""The checks no similarity can overrule: a claim's numbers are its passage's and about the
same thing, it names nothing the passage does not, it keeps the passage's negation and scope
(local or overseas, daily or monthly), and a "free" claim keeps the conditions under which the
passage charges."""

from __future__ import annotations

import re
from collections.abc import Sequence

from guardrag.core.grounding.entities import entity_key, extract_entities
from guardrag.core.grounding.evidence import Part, Source, Unit, cite_label
from guardrag.core.grounding.lexicon import bound_words, content_words, negation_cues
from guardrag.core.grounding.numbers import (
    Mention,
    clause_spans,
    conversion,
    extract_mentions,
    frequencies,
    number_text,
    same_fact,
)
from guardrag.core.grounding.split import VERB_HINTS, claim_parts
from guardrag.core.text import stem, wordset
from guardrag.core.text import words as tokens

#: Words either side of a number that say what the number is about (for the swap check).
NUMBER_CONTEXT_WORDS = 3

#: Weight of a clause's words farther from a number than NUMBER_CONTEXT_WORDS.
FAR_CONTEXT_WEIGHT = 0.5

#: A source sentence "says what the claim says" when it holds this share of the claim's content
#: words (and passes min_similarity); if its polarity differs, the claim is a negation flip.
NEGATION_COVERAGE = 0.6

# --- conditions on "free" ---

#: A claim or clause saying something costs nothing.
_FREE_RE = re.compile(
    r"\b(?:free|no (?:fees?|charges?|cost)|without (?:any )?(?:fees?|charges?)"
    r"|at no (?:extra )?cost|costs? nothing)\b",
    re.IGNORECASE,
)
#: A clause that charges: a fee word (and, checked apart, a figure).
_FEE_RE = re.compile(r"\b(?:fees?|charges?|charged|costs?|carry|carries)\b", re.IGNORECASE)
#: A claim that states its own exception ("free except by credit card") keeps the condition.
_EXCEPTION_RE = re.compile(
    r"\b(?:except|only|but|unless|apart from|other than|excluding)\b", re.IGNORECASE
)
_PRICE_WORDS = frozenset({"fre", "fe", "charg", "cost"})

# --- scope ---

#: Scope words that exclude each other. A claim that gives a passage's fact under another
#: scope than the passage's own ("a local ATM withdrawal costs RM10" from "overseas ATM
#: withdrawals cost RM10") changes what the passage says, however close the rest of its words.
SCOPES: tuple[tuple[frozenset[str], ...], ...] = (
    (wordset("local locally domestic domestically"),
     wordset("overseas abroad international internationally foreign")),
    (wordset("online"), wordset("offline")),
    (wordset("physical"), wordset("virtual")),
    (wordset("prepaid"), wordset("postpaid")),
    (wordset("minimum"), wordset("maximum")),
    (wordset("incoming inbound"), wordset("outgoing outbound")),
    (wordset("personal"), wordset("business corporate")),
    (wordset("daily"), wordset("weekly"), wordset("monthly"), wordset("yearly annual annually")),
    (wordset("automatic automatically"), wordset("manual manually")),
    (wordset("permanent permanently"), wordset("temporary temporarily")),
)  # fmt: skip


def number_problem(claim: str, sources: Sequence[Source], sentence_sim: dict[str, float]) -> str:
    """Why the claim's numbers are not those of the sources, or "" if they are."""
    label = cite_label(s.passage.number for s in sources)
    pool = [m for s in sources for m in s.mentions]
    stated = [pair for s in sources for pair in s.rates]
    mentions = extract_mentions(claim)
    by_rate: list[Mention] = []  # a conversion at a stated rate: checked as a pair, here
    for m in mentions:
        if any(same_fact(m, p) for p in pool):
            continue
        if (base := conversion(m, mentions, stated)) is None:
            return f"number {m.label()} not in passage {label}"
        by_rate += [m, base]
    mentions = [m for m in mentions if not any(m is x for x in by_rate)]
    known = set().union(*(s.frequencies for s in sources))
    for freq in sorted(frequencies(claim) - known):
        return f"frequency 'per {freq}' not in passage {label}"
    return (
        _swap_problem(claim, mentions, sources, sentence_sim)
        or _listed_problem(claim, mentions, sources)
        or _price_role_problem(claim, mentions, sources)
    )


def _swap_problem(
    claim: str, mentions: list[Mention], sources: Sequence[Source], sentence_sim: dict[str, float]
) -> str:
    """A number that is in the passage but bound to something else there: "daily limit RM 20,000"
    when it says "daily limit RM 5,000, monthly limit RM 20,000".

    The clause a claim's number is about is the source clause sharing most of the words around the
    number (near words count double); ties go to the clause whose sentence is closest in meaning.
    It is a conflict only if that clause states another value of the same kind that the claim does
    not also state ("from RM 5,000 to RM 10,000" names both) and no clause holding the claim's
    value ranks as high.
    """
    norm = number_text(claim)
    clauses = [c for s in sources for c in s.clauses]
    for m in mentions:
        near, far = _number_context(norm, m, mentions)
        if m.kind == "number" or not near | far:
            continue
        ranked = [
            (
                len(near & c.words) + FAR_CONTEXT_WEIGHT * len(far & c.words),
                round(sentence_sim.get(c.sentence, 0.0), 6),
                c,
            )
            for c in clauses
        ]
        best = max((w, s) for w, s, _ in ranked)
        if best[0] == 0:
            continue
        holding = [(w, s, c) for w, s, c in ranked if _holds(c.mentions, m)]
        if holding and max((w, s) for w, s, _ in holding) >= best:
            continue
        # a price is bound to the clause that prices: "cash top-ups cost RM1 each" keeps RM1 of
        # "cash top-ups are RM10 to RM500 per transaction, cost RM1 each"
        priced = _priced(norm, m.start) and any(_FEE_RE.search(c.text) for *_, c in holding)
        for w, s, c in ranked:
            rivals = [
                x
                for x in c.mentions
                if (w, s) == best
                and x.kind == m.kind
                and not (priced and not _FEE_RE.search(c.text))
                and not any(same_fact(y, x) for y in mentions)
            ]
            if rivals:
                return (
                    f"number {m.label()} conflicts with passage [{c.number}], which says "
                    f"{rivals[0].label()}: '{c.text.strip()}'"
                )
    return ""


def _listed_problem(claim: str, mentions: list[Mention], sources: Sequence[Source]) -> str:
    """A figure of one listed thing given for another: the claim names a thing the passage lists
    ("cash top-ups (RM1)") and gives it the figure of another item ("ATM withdrawals (RM1 local,
    RM10 plus 1% overseas)") whose name the claim never says."""
    items = [p for s in sources for p in s.parts if p.in_list]
    if not items:
        return ""
    said = content_words(number_text(claim))

    def named(item: Part) -> frozenset[str]:
        return item.subject - _PRICE_WORDS - {"apply"}  # "fees apply to" names nothing

    for m in mentions:
        if m.kind not in ("money", "percent"):
            continue
        holders = [i for i in items if _holds(i.mentions, m)]
        if not holders or any(not named(i) or named(i) & said for i in holders):
            continue  # the figure's own item is named (or nameless): nothing swapped
        others = [i for i in items if i not in holders and named(i) & said]
        if others:
            return (
                f"number {m.label()} is what passage [{holders[0].number}] gives for "
                f"'{holders[0].text.strip()}', not for '{others[0].text.strip()}'"
            )
    return ""


def _price_role_problem(claim: str, mentions: list[Mention], sources: Sequence[Source]) -> str:
    """An amount given as a price that the passage states as something else: "the fee for cash
    top-ups is RM10 to RM500" where it says "cash top-ups are RM10 to RM500 per transaction, cost
    RM1 each" (the price is another part of the same sentence)."""
    norm = number_text(claim)
    parts = [p for s in sources for p in s.parts]
    for m in mentions:
        if m.kind != "money" or not _priced(norm, m.start):
            continue
        holders = [p for p in parts if _holds(p.mentions, m)]
        if not holders or any(_FEE_RE.search(p.text) for p in holders):
            continue
        for held in holders:
            for price in parts:
                if (
                    (price.number, price.sentence) == (held.number, held.sentence)
                    and price is not held
                    and _FEE_RE.search(price.text)
                    and any(x.kind == "money" and not _holds(mentions, x) for x in price.mentions)
                ):
                    return (
                        f"number {m.label()} is not a price in passage [{held.number}] "
                        f"('{held.text.strip()}'); it prices '{price.text.strip()}'"
                    )
    return ""


def _priced(norm: str, at: int) -> bool:
    """Whether the claim's clause around position `at` calls its figure a price."""
    return any(a <= at < b and _FEE_RE.search(norm[a:b]) for a, b in clause_spans(norm))


def _holds(found: Sequence[Mention], mention: Mention) -> bool:
    return any(same_fact(mention, x) for x in found)


def _number_context(norm: str, m: Mention, mentions: list[Mention]) -> tuple[set[str], set[str]]:
    """Content words of the number's clause: the few nearest it, and the rest."""
    for a, b in clause_spans(norm):
        if a <= m.start < b:
            left, right = norm[a : m.start], norm[m.end : b]
            for other in mentions:  # other numbers and their units are not context
                left = left.replace(other.surface, " ")
                right = right.replace(other.surface, " ")
            lw = [stem(w) for w in tokens(left) if content_words(w)]
            rw = [stem(w) for w in tokens(right) if content_words(w)]
            near = set(lw[-NUMBER_CONTEXT_WORDS:] + rw[:NUMBER_CONTEXT_WORDS])
            return near, set(lw + rw) - near
    return set(), set()


def scope_problem(claim: str, sources: Sequence[Source], sentence_sim: dict[str, float]) -> str:
    """The claim states a scope ("local") where the passage part it draws on states another
    ("overseas"), and that part's sentence never says the claim's."""
    said = set(tokens(bound_words(claim)))
    stated = [(scope, group) for scope in SCOPES for group in scope if group & said]
    drawn = _drawn_on(claim, sources, sentence_sim) if stated else None
    if drawn is None:
        return ""
    part, sentence = drawn
    in_part, in_sentence = set(tokens(bound_words(part.text))), set(tokens(bound_words(sentence)))
    for scope, group in stated:
        other = sorted(w for g in scope if g is not group for w in g & in_part)
        if other and not group & in_sentence:
            return (
                f"says '{min(group & said)}' where passage [{part.number}] says '{other[0]}': "
                f"'{part.text.strip()}'"
            )
    return ""


def _drawn_on(
    claim: str, sources: Sequence[Source], sentence_sim: dict[str, float]
) -> tuple[Part, str] | None:
    """The passage part (and its sentence) a claim draws on: the one holding its figure, else
    the one sharing most of its words, ties to the closest sentence; so "overseas withdrawals
    cost RM10" draws on "overseas RM10" of "local ones cost RM1, overseas RM10"."""
    words, mentions = content_words(claim), extract_mentions(claim)
    best: tuple[tuple[bool, int, float], Part, str] | None = None
    for src in sources:
        for part in src.parts:
            sentence = src.sentences[part.sentence]
            shared = len(words & part.words)
            held = any(_holds(part.mentions, m) for m in mentions)
            rank = (held, shared, sentence_sim.get(sentence, 0.0))
            if shared and (best is None or rank > best[0]):
                best = (rank, part, sentence)
    return None if best is None else (best[1], best[2])


def entity_problem(claim: str, sources: Sequence[Source]) -> str:
    known = set().union(*(s.entities for s in sources))
    for entity in extract_entities(claim):
        key = entity_key(entity)
        if key not in known and stem(key) not in known:
            label = cite_label(s.passage.number for s in sources)
            return f"entity '{entity}' not in passage {label}"
    return ""


def omitted_fee_problem(claim: str, sources: Sequence[Source]) -> str:
    """ "Top-ups are free" where the passage makes some top-ups free and charges for others: the
    claim drops the condition. Passes when the claim names what sets the free ones apart
    ("FPX top-ups are free"), states the exception itself, or charges in the same breath
    ("the first 5 are free, and each one after that costs RM0.50": the passage's own words)."""
    if not _FREE_RE.search(claim) or _EXCEPTION_RE.search(claim):
        return ""
    if _FEE_RE.search(claim) and re.search(r"\d", claim):
        return ""
    words = content_words(claim) - _PRICE_WORDS
    for src in sources:
        if not words <= frozenset().union(*src.words.values()):
            continue  # the claim is about something this passage does not talk about
        clauses = [c for s in src.sentences for c in (claim_parts(s) or [s])]
        free = [(c, content_words(c)) for c in clauses if _FREE_RE.search(c)]
        charged = [
            (c, content_words(c)) for c in clauses if _FEE_RE.search(c) and re.search(r"\d", c)
        ]
        for free_clause, free_words in free:
            for clause, fee_words in charged:
                if clause == free_clause:
                    continue  # "free for the first 5, then RM0.50" states its own condition
                if words & free_words & fee_words and not words & (free_words - fee_words):
                    n = src.passage.number
                    return (
                        f"says free, but passage [{n}] charges for some of it: '{clause.strip()}'"
                    )
    return ""


def unit_negation_problem(
    words: set[str], negations: int, unit: Unit, sentence_sim: dict[str, float]
) -> str:
    """A claim supported only by several sentences together (a title and a guideline) keeps the
    polarity of the one closest in meaning: "Promotions can show only benefits" takes its words
    from "Promotions guide" and "...should avoid presenting benefits without balance"."""
    statements = [
        s
        for s in unit.sentences
        if words & content_words(s) and (set(tokens(s)) & VERB_HINTS or negation_cues(s))
    ]  # a heading ("Promotions guide > crypto") has no polarity to keep
    if not statements:
        return ""
    closest = max(statements, key=sentence_sim.__getitem__)
    if negation_cues(closest) == negations:
        return ""
    return f"negation differs from passage {cite_label(unit.numbers)}: '{closest}'"


def negation_problem(
    words: set[str],
    negations: int,
    sources: Sequence[Source],
    sentence_sim: dict[str, float],
    min_similarity: float,
) -> str:
    """The source sentence that says what the claim says (near-total word coverage, similar
    meaning) has the opposite polarity. A sentence of the same polarity that matches as well wins:
    "Reloads are free. Reloads are not free on weekends." supports "Reloads are free"."""
    if not words:
        return ""
    matching: list[tuple[float, bool, str, int]] = []
    for src in sources:
        for sentence in src.sentences:
            sim = sentence_sim[sentence]
            # The source is split the way claims are, so "X is free [1]" taken from
            # "X is free, and there is no Y fee" is compared with its own clause, not with "no".
            parts = claim_parts(sentence)
            for text in (sentence, *parts) if len(parts) > 1 else (sentence,):
                part_words = src.words[sentence] if text == sentence else content_words(text)
                coverage = len(words & part_words) / len(words)
                if coverage >= NEGATION_COVERAGE and sim >= min_similarity:
                    same = negation_cues(text) == negations
                    matching.append((round(coverage + sim, 6), same, sentence, src.passage.number))
    if not matching:
        return ""
    top = max(m[0] for m in matching)
    leaders = [m for m in matching if m[0] == top]
    if any(same for _, same, _, _ in leaders):
        return ""
    _, _, sentence, number = leaders[0]
    return f"negation differs from passage [{number}]: '{sentence}'"
