"""An answer must be of the kind the question asks for: "How often ...?", "How long ...?", "At
what age ...?", "What level ...?" ask for a figure, and so does a question about a price ("Do I
pay anything to ...?", "Is there a fee for ...?"); a draft that states none ("Bloating is a
symptom that can be associated with ovarian cancer.", "Bank transfers are sent via DuitNow.")
answers something else, however well each of its words is supported by its source."""

from __future__ import annotations

import re

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
