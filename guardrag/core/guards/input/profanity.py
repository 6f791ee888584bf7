"""Profanity: a small offline word list, English and Malay (with common Manglish).

Whole words only, with their inflections, so "Scunthorpe", "assessment", "cocktail",
"sosial", "shitake" and "Dickens" pass. Matched on the de-obfuscated view too, so "sh1t",
"f u c k" and "f*ck" count. Mild words (damn, crap, wtf, bodoh) and words with a common
literal sense (babi = pig, anjing = dog, tongkol = tuna, butuh = "need" in Indonesian, cock,
dick, ass, fag, prick) are deliberately left out.
`alt-profanity-check` was not adopted: English-only, it pulls in scikit-learn (~1 s import)
for a task a word list does in microseconds.
"""

from __future__ import annotations

import re

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.unit import input_rule

_ENGLISH = (
    r"f+u+c+k+\w*|f\*{3}|f\*+c?k\w*|f\*+\w*k|f\*+(?:ing|in|er|ers|ed)|fck\w*|fcuk\w*|fuk|fukin|fuking|fvck\w*|phuck\w*|"
    r"motherf\w+|mofo|stfu|shit|shits|shitty|shithead|shitting|bullshit|horseshit|sh\*t|bitch\w*|"
    r"b\*tch|bastard\w*|asshole\w*|arsehole\w*|a\*\*hole|dumbass\w*|jackass\w*|cunt\w*|c\*nt|"
    r"dickhead\w*|wanker\w*|wank|bollocks|twat\w*|douche\w*|slut\w*|whore\w*|"
    r"faggot\w*|retard|retards|retarded|piss off|pissed off|son of a bitch|cocksucker\w*"
)
_MALAY = (
    r"puki\w*|pukimak|kimak|pantat|lancau|pundek|pundeh|bangsat|keparat|sundal|jubur|butoh|"
    r"kote|haram ?jadah|pergi mampus|mampus kau|celaka|sial(?:an)?|bapak kau|cibai|chibai|"
    r"lanjiao|lan jiao|kanina"
)
PROFANITY = re.compile(rf"(?<![a-z0-9])(?:{_ENGLISH}|{_MALAY})(?![a-z0-9])", re.IGNORECASE)


def find_profanity(text: str) -> re.Match[str] | None:
    """The first profane word in an already lower-cased text, if any."""
    return PROFANITY.search(text)


def mask_word(word: str) -> str:
    return word[:1] + "*" * (len(word) - 1)


def detect_profanity(norm: Normalized) -> GuardFinding | None:
    """PROFANITY when a listed word appears as a whole word in any word view."""
    for label, view in norm.word_views():
        match = find_profanity(view)
        if match:
            return finding(
                RefusalReason.PROFANITY,
                "profanity.wordlist",
                f"profane word {mask_word(match.group(0))!r} in {label}",
            )
    return None


GUARD = input_rule("profanity", "Profanity", detect_profanity, (RefusalReason.PROFANITY,))
