"""Small shared machinery for the rule modules: a named pattern, view matching, excerpts,
and the vocabulary several families share (people, possessives)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.normalize import Views

_EXCERPT_CHARS = 60


@dataclass(frozen=True)
class Rule:
    """One named pattern. `weight` is the strength reported when it fires (0..1).
    `requires`: a second pattern the same view must also match (a frame that is an attack
    only with what it frames: a persona "with no rules", not a persona alone)."""

    name: str
    pattern: re.Pattern[str]
    weight: float = 1.0
    requires: re.Pattern[str] | None = None


def excerpt(text: str, start: int, end: int) -> str:
    """The matched span, shortened for the audit detail."""
    span = text[start:end].strip()
    if len(span) > _EXCERPT_CHARS:
        span = span[: _EXCERPT_CHARS - 3] + "..."
    return span


def first_rule_finding(
    reason: RefusalReason, rules: Iterable[Rule], views: Views
) -> GuardFinding | None:
    """A finding for the first rule (in order) that matches any view, else None."""
    for rule in rules:
        for label, view in views:
            match = rule.pattern.search(view)
            if not match:
                continue
            also = rule.requires.search(view) if rule.requires is not None else None
            if rule.requires is None or also:
                return rule_finding(reason, rule, view, match, label, also)
    return None


def rule_finding(
    reason: RefusalReason,
    rule: Rule,
    view: str,
    match: re.Match[str],
    label: str,
    also: re.Match[str] | None = None,
) -> GuardFinding:
    quoted = excerpt(view, match.start(), match.end())
    with_ = f" with {excerpt(view, also.start(), also.end())!r}" if also else ""
    return finding(reason, rule.name, f"matched {quoted!r}{with_} in {label}", score=rule.weight)


# --- shared vocabulary -------------------------------------------------------------------

#: People someone may ask about (relations, roles). Used for "my <relation>'s ...".
RELATIONS = (
    r"(?:ex|ex-?wife|ex-?husband|ex-?girlfriend|ex-?boyfriend|ex-?partner|wife|husband|spouse|"
    r"partner|girlfriend|boyfriend|fianc[eé]e?|date|match|crush|friend|friends|bestie|boss|"
    r"manager|supervisor|coworker|co-worker|colleague|employee|employer|staff|neighbou?r|"
    r"landlord|landlady|tenant|roommate|housemate|flatmate|sister|brother|sibling|mother|mom|"
    r"mum|father|dad|parents?|grandparents?|grandma|grandpa|grandmother|grandfather|son|"
    r"daughter|child|children|kid|kids|baby|toddler|family|relatives?|cousin|uncle|aunt|"
    r"nephew|niece|in-laws?|teacher|student|classmate|mentee|mentor|therapist|doctor|nurse|"
    r"cleaner|maid|servant|helper|gardener|driver|babysitter|nanny|tutor|coach|rival|enemy|"
    r"customer|client|officer|cop|pastor|priest|imam|lawyer|accountant|contractor|roofer|"
    r"plumber|tinder match|stepmother|stepfather|stepson|stepdaughter|girl|guy|lady|man|woman)"
)
#: Things a user owns that take a possessive without being a person ("my account's").
_THINGS = (
    r"(?:account|wallet|e-?wallet|card|app|phone|device|company|business|shop|store|bank|car|"
    r"house|sim|profile|own|tng|touch|laptop|computer|browser|email|number)"
)
_APOS = r"(?:'s|’s|s'|s’|')"
#: A third party, as owner ("someone's", "another user's", "my roofer's", "his").
THIRD_PARTY_POSSESSIVE = (
    r"(?:(?:some|any|every)(?:one|body)(?: else)?"
    + _APOS
    + r"|(?:other|others|another|random|the last|the previous|the next|a random)\s+"
    r"(?:people|persons?|users?|customers?|members?|account ?holders?|callers?|individuals?)"
    + _APOS
    + r"|(?:an?|the|this|that|some) (?:\S+ )?(?:stranger|person|guy|girl|woman|man|lady|customer|"
    r"user|member|caller|victim|account ?holder|other person)"
    + _APOS
    + r"|others"
    + _APOS
    + r"|strangers?"
    + _APOS
    + r"|celebrit(?:y|ies)"
    + _APOS
    + r"|(?:my|our|his|her|their)\s+(?:\S+\s+)?(?!"
    + _THINGS
    + r"\b)[a-z][a-z-]*"
    + _APOS
    + r")"
)
#: A third party as object ("of another user", "of the last customer", "pengguna lain").
THIRD_PARTY_OBJECT = (
    r"(?:(?:some|any)(?:one|body)(?: else)?|other (?:people|users?|customers?|members?|persons?|"
    r"account ?holders?)|another (?:person|user|customer|member|account ?holder)|"
    r"(?:the |a )?(?:last|previous|next|other|random) (?:customer|user|person|member|caller|"
    r"account ?holder|customers|users|people)s?|(?:my|his|her|their) (?:\S+ )?" + RELATIONS + r")"
)
