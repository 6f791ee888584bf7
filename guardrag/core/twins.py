"""Twin answers: FAQ entries that give a question the same answer.

A help centre states one fact in several entries: the card's delivery time is in the entry on
ordering a card and again in the one on a lost card. The verbatim rule asks the top entry to lead
its runner-up, so such a pair looked like a close call and the question was refused although
either entry answers it. A runner-up that gives the same answer is no rival.

"The same answer" is kept narrow, because a wrong twin would be served verbatim: in each entry, the
sentence holding most of the question's words must hold the same question words (more than half of
them, and at least `MIN_HELD`: a sentence that shares a word or two with the question by chance
answers nothing), and both sentences must state the same figures, at least one that the question
does not state itself ("7-14 working days"; the number of a name such as "COVID-19" is no figure).
Entries that share a topic but answer differently, or state one figure about different things ("RM1
per cash top-up" against "RM1 per ATM withdrawal" for an ATM question: they hold different question
words), stay rivals.
"""

from __future__ import annotations

import re

from guardrag.core.grounding.numbers import Mention, extract_mentions, same_fact
from guardrag.core.grounding.split import split_sentences
from guardrag.core.text import content_words

#: Question words both answering sentences must hold: one shared word is only a shared topic.
MIN_HELD = 2
#: A number joined to a word by a hyphen names something ("COVID-19", "A-1"); it states nothing.
_NAMED_NUMBER = re.compile(r"(?<=[^\W\d_])-\d+\b")


def answering_sentence(asked: frozenset[str], answer: str) -> tuple[str, frozenset[str]]:
    """The sentence of `answer` holding most of the question's words `asked`, and those words
    (the first such sentence on a tie; ("", {}) when none holds any)."""
    best, held = "", frozenset[str]()
    for line in answer.splitlines():
        for sentence in split_sentences(line):
            words = asked & frozenset(content_words(sentence))
            if len(words) > len(held):
                best, held = sentence, words
    return best, held


def figures(text: str, asked: list[Mention]) -> list[Mention]:
    """The figures `text` states that are not the question's own (`asked`), names' numbers
    left out."""
    stated = extract_mentions(_NAMED_NUMBER.sub("", text))
    return [m for m in stated if not any(same_fact(m, q) for q in asked)]


def _same_figures(a: list[Mention], b: list[Mention]) -> bool:
    return (
        bool(a and b)
        and all(any(same_fact(m, n) for n in b) for m in a)
        and all(any(same_fact(n, m) for m in a) for n in b)
    )


def same_answer(question: str, first: str, other: str) -> bool:
    """Whether the answers `first` and `other` give `question` the same answer (see module)."""
    asked = frozenset(content_words(question))
    one, one_held = answering_sentence(asked, first)
    two, two_held = answering_sentence(asked, other)
    if len(one_held) < max(MIN_HELD, len(asked) // 2 + 1) or one_held != two_held:
        return False
    own = extract_mentions(_NAMED_NUMBER.sub("", question))
    return _same_figures(figures(one, own), figures(two, own))
