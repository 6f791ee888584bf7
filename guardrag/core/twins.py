"""Twin answers: FAQ entries that give a question the same answer.

A help centre states one fact in several entries: the card's delivery time is in the entry on
ordering a card and again in the one on a lost card. The verbatim rule asks the top entry to lead
its runner-up, so such a pair looked like a close call and the question was refused although
either entry answers it. A runner-up that gives the same answer is no rival.

"The same answer" is kept narrow, because a wrong twin would be served verbatim: in each entry,
the sentence holding most of the question's words must hold the same question words, and both
sentences must state the same figures, at least one ("7-14 working days"). Entries that share a
topic but answer differently, or state one figure about different things ("RM1 per cash top-up"
against "RM1 per ATM withdrawal" for an ATM question: they hold different question words), stay
rivals.
"""

from __future__ import annotations

from guardrag.core.grounding.numbers import Mention, extract_mentions, same_fact
from guardrag.core.grounding.split import split_sentences
from guardrag.core.text import content_words


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
    if not one_held or one_held != two_held:
        return False
    return _same_figures(extract_mentions(one), extract_mentions(two))
