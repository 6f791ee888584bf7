"""Parts of a document that are not answers, known by their headings, and the questions that
ask about them all the same.

A guideline's "Recommendations for research" asks questions the guideline does not answer
("Does treatment X improve outcome Y?"), and its "Update information" says what changed, not
what to do; either, served to "Does the guideline recommend X?", reads as a recommendation it
never made. A chunk under such a heading is marked at ingest with its kind of aside; retrieval
leaves it out unless the question asks about that kind ("What research does it call for?",
"What changed in the last update?"). A publisher's notice about using the document ("Your
responsibility", "Disclaimer", "Notice of rights") says how to read it, not what it says, and is
set aside the same way unless the question asks about obligations, liability or rights. A
"Rationale", "Why the committee made the recommendations" or "Committee discussion" section
explains a recommendation (the evidence, what was weighed, what was left to judgement): served
to "What threshold should I use?" it reads as an answer it is not, so it is set aside unless
the question asks why, or about the reasoning or evidence behind it. The
document's opening (title page, publication details, the text before its first section, and a
"Contents" section: its leader lines are dropped by the reader, the front matter after them
stays) is marked too, and is never quoted as an answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The opening of a document that has sections: its title page and front matter.
OPENING = "opening"
#: Heading patterns of each kind of aside (matched against every heading of a chunk's path).
_HEADINGS: dict[str, re.Pattern[str]] = {
    "research": re.compile(
        r"\b(?:recommendations?\s+for\s+(?:future\s+|further\s+)?research|research\s+"
        r"recommendations?|(?:future|further)\s+research|research\s+(?:gaps?|questions?|"
        r"priorities|needs))\b",
        re.IGNORECASE,
    ),
    "changes": re.compile(
        r"\b(?:update\s+information|changes?\s+(?:to|in)\s+(?:this|the)\s+(?:guideline|"
        r"guidance|document|policy|standard|version)|what(?:'s|\s+has|\s+have)?\s+changed|"
        r"change\s*log|revision\s+history|document\s+history|version\s+history|"
        r"summary\s+of\s+changes)\b",
        re.IGNORECASE,
    ),
    "rationale": re.compile(
        r"\b(?:rationales?|why\s+(?:the|we|this)\s+(?:\w+\s+)?(?:made|recommend\w*|decided|"
        r"chose)|(?:committee|panel|board|group)(?:'s)?\s+discussions?|discussions?\s+of\s+"
        r"the\s+evidence|basis\s+for\s+(?:the\s+)?conclusions?|evidence\s+to\s+"
        r"recommendations?|how\s+the\s+recommendations?\s+might\s+affect\s+practice)\b",
        re.IGNORECASE,
    ),
    "notice": re.compile(
        r"^\s*(?:your\s+responsibilit(?:y|ies)|disclaimers?|legal\s+notices?|notice\s+of\s+"
        r"rights|copyright(?:\s+notice)?|acknowledge?ments?)\s*$",
        re.IGNORECASE,
    ),
}
#: A section heading of front matter: marked as the document's opening.
_FRONT = re.compile(r"^\s*(?:table\s+of\s+)?contents\s*$", re.IGNORECASE)
#: Words of a question that asks about that kind of aside.
_ASKED: dict[str, re.Pattern[str]] = {
    "research": re.compile(
        r"\b(?:research\w*|stud(?:y|ies)|trials?|evidence\s+gaps?|unanswered)\b", re.IGNORECASE
    ),
    "changes": re.compile(
        r"\b(?:chang\w*|updat\w*|amend\w*|revis\w*|new\s+in|versions?|added|removed|"
        r"replaced|withdrawn)\b",
        re.IGNORECASE,
    ),
    "rationale": re.compile(
        r"\b(?:why|rationales?|reason\w*|justif\w*|committee|panel|evidence|basis|"
        r"explain\w*)\b",
        re.IGNORECASE,
    ),
    "notice": re.compile(
        r"\b(?:responsib\w*|mandatory|obligat\w*|disclaim\w*|liab\w*|copyright|legal\w*|"
        r"rights?|permission|reproduc\w*|acknowledg\w*|override)\b",
        re.IGNORECASE,
    ),
}


def aside_of(path: Sequence[str]) -> str | None:
    """The kind of aside a chunk under this heading path is ("research", "changes",
    "rationale", "notice", the "opening" for a contents section), or None."""
    if path and _FRONT.match(path[0]):
        return OPENING
    for kind, pattern in _HEADINGS.items():
        if any(pattern.search(heading) for heading in path):
            return kind
    return None


def asked_about(question: str, aside: str) -> bool:
    """Whether `question` asks about this kind of aside (the opening is never an answer)."""
    pattern = _ASKED.get(aside)
    return pattern is not None and pattern.search(question) is not None
