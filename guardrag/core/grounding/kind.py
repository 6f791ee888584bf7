"""An answer must be of the kind the question asks for: "How often ...?", "How long ...?", "At
what age ...?", "What level ...?" ask for a figure, and so does a question about a price ("Do I
pay anything to ...?", "Is there a fee for ...?"); a draft that states none ("Bloating is a
symptom that can be associated with ovarian cancer.", "Bank transfers are sent via DuitNow.")
answers something else, however well each of its words is supported by its source."""

from __future__ import annotations

import re
from collections.abc import Callable

from guardrag.core.text import STOPWORDS, straighten, wordset

#: Questions that ask for a quantity: a frequency, a duration, a count, an age, a level, a price.
_ASKS_FIGURE = re.compile(
    r"\b(?:how\s+(?:often|many|much|long|old|soon|frequently|far)|at\s+what\s+(?:age|point|"
    r"level|dose)|what\s+(?:\w+\s+){0,2}(?:age|ages|level|score|dose|percentage|threshold|"
    r"number|amount|cut-?off|frequency|duration|fees?|charges?|price|cost))\b|"
    # a price asked in yes/no form: "do I pay anything", "is there a fee", "does it cost"
    r"(?<!how )(?<!where )(?<!when )(?<!why )\b(?:do|does|will|would|must|should)\s+(?:i|we|you|they|it|customers?|users?)\s+(?:have\s+"
    r"to\s+|need\s+to\s+)?(?:pay|be\s+charged|cost|get\s+charged)\b|\b(?:is|are)\s+there\s+"
    r"(?:an?\s+|any\s+)?(?:\w+\s+)?(?:fees?|charges?|costs?)\b|\bis\s+(?:it|this|that)\s+(?:free|"
    r"chargeable)\b",
    re.IGNORECASE,
)
#: What states a quantity: digits, number words, frequencies and time words, "free", a currency.
_FIGURE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"hundred|thousand|once|twice|daily|weekly|monthly|yearly|annually|hourly|every|per|"
    r"immediately|within|half|single|double|no\s+(?:age|minimum|maximum|limit|fees?|charges?|"
    r"cost)|free|waived|nothing|rm|usd|sgd)\b|[$€£]",
    re.IGNORECASE,
)

#: Citations and a guideline's year markers ("[1]", "[2015]") state no figure of the answer.
_BRACKETS = re.compile(r"\[[^\]]*\]")


def asks_for_figure(question: str) -> bool:
    """Whether `question` asks for a frequency, duration, count, age or level."""
    return _ASKS_FIGURE.search(question) is not None


def figure_missing(question: str, draft: str) -> str | None:
    """Why `draft` does not answer `question` in kind (it asks a figure; none is stated)."""
    match = _ASKS_FIGURE.search(question)
    if match is None or _FIGURE.search(_BRACKETS.sub(" ", draft)):
        return None
    return f"the question asks '{match.group(0).lower()}' and the draft states no figure"


#: A year the question names ("net sales for fiscal 2024", "deliveries in 2023").
_YEAR = re.compile(r"\b(?:19|20)\d{2}\b")


def year_unstated(question: str, source: str) -> str | None:
    """Why `source` cannot answer `question`: the question asks about a year the source never
    states. A filing or report gives each figure for its own period; a figure from 2022 does
    not answer "for fiscal 2024", however well it is quoted."""
    missing = sorted(set(_YEAR.findall(question)) - set(_YEAR.findall(source)))
    if not missing:
        return None
    return f"the question asks about {', '.join(missing)}; the passage never states it"


#: Words that single out one thing: "the exact wording", "what specific metrics", "the precise
#: date". What they single out must be something the KB names; sharing the rest of the question
#: is not stating it.
_PARTICULAR = wordset("exact exactly specific precise particular actual")
#: A definition asked for by name: "the definition of X", "the meaning of X" ("meant by X" too).
_DEFINES = wordset("definition definitions meaning")
#: Nouns a body of rules goes by; a modifier names which rules ("record-keeping requirements",
#: "referral criteria"), and a KB that never names them does not state those rules.
_RULES = wordset("requirement requirements rules obligations criteria standards duties")
#: Modifiers of a rules noun that say how important or how general the rules are, not which
#: ("the key requirements", "the minimum criteria").
_GENERAL = wordset(
    """key main new current general legal basic relevant applicable important additional
    minimum maximum mandatory regulatory statutory overall usual standard same other different
    further common formal official strict"""
)
#: Words before a rules noun that never say which rules.
_NOT_WHICH = _GENERAL | _PARTICULAR
#: Consequences asked for by name; a KB that names any of them may state the one asked for (a
#: question about penalties is answered by "the regulator may fine a firm").
_CONSEQUENCES = wordset("penalty penalties fines sanctions")
_CONSEQUENCE_WORDS = wordset(
    "penalty penalties penalise penalize fine fines fined sanction sanctions liable offence "
    "offense punish punishment enforcement prosecute prosecution"
)
#: Where the phrase named after such a word ends: a preposition, a verb of the question, a
#: conjunction, a wh-word.
_BOUNDARY = wordset(
    """for of to in on under by with from at about as that which who whom whose when where why
    how what is are was were be been being do does did can could should must will would may
    might shall need needed required used apply applies and or than if"""
)
#: "what kind of X": the kind is X's.
_KIND_OF = wordset("kind kinds type types sort sorts form forms")
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-'][A-Za-z0-9]+)*")
#: The longest focus phrase read: a focus is a short noun phrase ("exact font size").
_MAX_PHRASE = 3


def focus(question: str) -> list[str]:
    """What `question` asks for by name, when it names it: the phrase after "exact", "specific"
    or "the definition of" / "meant by", the words that say which rules a rules noun means
    ("record-keeping" requirements), a penalty. Most questions name no focus ("What should I do
    if ...?") and get []."""
    tokens = _TOKEN.findall(straighten(question))
    lowered = [t.lower().removesuffix("'s") for t in tokens]
    found: list[str] = []
    for i, word in enumerate(lowered):
        after = lowered[i + 1 : i + 2]
        if word in _PARTICULAR:
            found.extend(_phrase_after(lowered, i + 1))
        elif (word in _DEFINES and after == ["of"]) or (word == "meant" and after == ["by"]):
            found.extend(_phrase_after(lowered, i + 2))
        elif word in _RULES:
            found.extend(_modifiers_before(tokens, i))
        elif word in _CONSEQUENCES and _asked_for(tokens, i):
            found.append(word)
    return list(dict.fromkeys(found))


def _phrase_after(lowered: list[str], start: int) -> list[str]:
    """The content words from `start` to the phrase's end ("the exact font size must ...");
    "kind of", "type of" are passed over (the kind is the next noun's)."""
    phrase: list[str] = []
    i = start
    while i < len(lowered) and len(phrase) < _MAX_PHRASE:
        word = lowered[i]
        if word in _KIND_OF and lowered[i + 1 : i + 2] == ["of"]:
            i += 2
            continue
        if word in _BOUNDARY:
            break
        if not (word in STOPWORDS or word in _RULES or word in _GENERAL):
            phrase.append(word)  # "the specific requirements": the rules noun's own reading
        i += 1
    return phrase


def _modifiers_before(tokens: list[str], index: int) -> list[str]:
    """The words right before a rules noun that say which rules ("record-keeping requirements");
    a name ("FCA requirements") or a possessive ("the firm's requirements") says whose, and "key"
    or "specific" how important or how exact, not which."""
    modifiers: list[str] = []
    for i in range(index - 1, max(-1, index - 1 - _MAX_PHRASE), -1):
        token, word = tokens[i], tokens[i].lower()
        whose = token.isupper() or (token[:1].isupper() and i > 0) or word.endswith("'s")
        if whose or word in STOPWORDS or word in _BOUNDARY or word in _NOT_WHICH:
            break
        modifiers.append(word)
    return modifiers[::-1]


def _asked_for(tokens: list[str], index: int) -> bool:
    """Whether the word at `index` is what a what/which question asks for ("What are the FCA
    penalties for ...?"), not a word of its topic ("Can I cancel without a penalty?")."""
    for token in reversed(tokens[:index]):
        word = token.lower()
        if word in ("what", "which"):
            return True
        if not (word in STOPWORDS or word in ("is", "are", "was", "were") or token.isupper()):
            return False
    return False


def focus_unnamed(question: str, names: Callable[[str], bool]) -> str | None:
    """Why no passage of a KB can answer `question`: it asks for something by name (`focus`)
    that the KB never names (`names(word)`: KBStats.names, any form of the word; for a penalty,
    any word of a consequence). "What are the record-keeping requirements for approving
    promotions?" is not answered by a KB that never speaks of keeping records, however many of
    its other words the KB shares. A KB that names the thing somewhere is left to the later
    checks: a passage that answers may list instances without the category's name ("What
    specific symptoms ...?")."""
    missing = [w for w in focus(question) if not _named(w, names)]
    if not missing:
        return None
    return f"the question asks for {', '.join(repr(w) for w in missing)}; the KB never names it"


def _named(word: str, names: Callable[[str], bool]) -> bool:
    if word in _CONSEQUENCES:
        return any(names(w) for w in _CONSEQUENCE_WORDS)
    return names(word)
