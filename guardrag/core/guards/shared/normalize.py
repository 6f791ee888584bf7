"""Text normalisation shared by every input rule: one pass per call, several views.

Rules about *words* (injection, jailbreak, harm, credentials, profanity) match the lower-cased
`words` view and, when obfuscation changed something, the de-obfuscated `folded` view and any
decoded payloads. Rules about *data* (card numbers, phones, NRIC, e-mail) match `text`, which
keeps case, digits and punctuation so values can be validated and masked.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata
from dataclasses import dataclass, field

# Invisible characters used to split trigger words ("ig\u200bnore"): zero-width and bidi
# controls, soft hyphen, variation selectors, Hangul fillers, C0/C1 controls (newline and tab
# are kept as whitespace). Unicode tag characters (U+E0000..E007F) are stripped here and
# decoded separately, because they can smuggle a whole hidden ASCII message.
INVISIBLE = re.compile(
    "[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f"
    "\ufeff\uffa0\U000e0000-\U000e007f]"
)
_TAG_CHARS = re.compile("[\U000e0020-\U000e007e]+")
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_SPACES = re.compile(r"[^\S\n]+")
_NEWLINES = re.compile(r" ?\n[\s]*")

# Cyrillic and Greek letters that render like Latin ones (NFKC does not fold them).
_HOMOGLYPHS = str.maketrans(
    {
        # Cyrillic lower / upper
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o",
        "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i",
        "ј": "j", "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ɡ": "g", "ь": "b",
        "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
        "С": "C", "Т": "T", "У": "Y", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J", "Ԁ": "D",
        # Greek lower / upper
        "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w",
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
        "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    }
)  # fmt: skip

# Leetspeak, applied only inside tokens that also contain a letter, so that amounts, PINs
# and card numbers ("1234", "4111 1111") are never rewritten.
_LEET = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
)
_LEET_TOKEN = re.compile(r"[a-z0-9@$]*[a-z][a-z0-9@$]*")
_LEET_CHARS = frozenset("013457@$")

# "i g n o r e" / "i.g.n.o.r.e" / "i-g-n-o-r-e": runs of 3+ single characters split by one
# separator are joined; a wider gap (two spaces) still separates words.
_SPACED_RUN = re.compile(r"(?<![a-z0-9@$])(?:[a-z0-9@$][ .\-_*+|/]){2,}[a-z0-9@$](?![a-z0-9@$])")
_SPACED_SEP = re.compile(r"[ .\-_*+|/]")
# "ignoooore" -> "ignore": runs of 3+ of one character collapse to one.
_REPEATS = re.compile(r"([a-z])\1{2,}")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")

# Misspelt override words ("igmre what I said before", "disregrad all prevoius instrutcions"):
# attackers misspell the words a filter looks for. A word within a keyword's edit budget
# (substitutions, adjacent transpositions, insertions, deletions) is read as the keyword when it
# starts with the same letter (typos rarely hit the first one), is not the keyword with a
# suffix ("ignored", "forgets") and is not an English word (_REAL_WORDS: the words that close
# in a 22k-word English vocabulary and their inflections, and the few it lacks: ignite,
# overwrite). Two edits for the long keywords with few English words that close, one where the
# neighbourhood is crowded (forget: forgot, forge, force, format, former ...).
_TYPO_KEYWORDS = {
    "ignore": 2,
    "disregard": 2,
    "override": 2,
    "previous": 2,
    "instructions": 2,
    "everything": 2,
    "instruction": 1,
    "forget": 1,
    "bypass": 1,
}
_REAL_WORDS = frozenset(
    {
        "igor", "igors", "forge", "forged", "forger", "forges", "forgot", "overtime",
        "precious", "previews", "premios", "instructors", "instructional", "bypast",
        "ignite", "ignites", "ignited", "overwrite", "overwrites", "overwrote",
    }
)  # fmt: skip
_TYPO_TOKEN = re.compile(r"[A-Za-z]{4,}")
_TYPO_FIRST = frozenset(k[0] for k in _TYPO_KEYWORDS)

# Base64 candidates: long enough to carry a sentence, or short but padded ("aGVsbG8=").
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_-])(?:[A-Za-z0-9+/_-]{16,}={0,2}|[A-Za-z0-9+/]{6,}={1,2})")
_PRINTABLE_SHARE = 0.9
_LETTER_SHARE = 0.6
_MAX_PAYLOADS = 4


#: (label, text) pairs handed to the rules; the label ends up in the audit detail.
Views = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Normalized:
    """All views of one input text (built once per check)."""

    original: str
    text: str  # NFKC, invisibles stripped, homoglyphs folded, whitespace collapsed; case kept
    words: str  # `text` lower-cased, diacritics stripped
    folded: str  # `words` with leetspeak, spaced letters and repeats undone
    compact: str  # `folded` with everything but letters and digits removed
    decoded: tuple[str, ...] = field(default_factory=tuple)  # payloads (base64, tag chars)
    respelled: str = ""  # `text` with misspelt override words read as the words (case kept)

    @property
    def obfuscated(self) -> bool:
        """True when de-obfuscation or decoding changed what the rules see."""
        return self.folded != self.words or bool(self.decoded)

    def word_views(self) -> Views:
        """(label, view) pairs for word rules, most literal first, so `detail` says whether
        the match needed de-obfuscation or decoding."""
        views: list[tuple[str, str]] = [("text", self.words)]
        if self.folded != self.words:
            views.append(("de-obfuscated text", self.folded))
        for payload in self.decoded:
            views.extend(("decoded payload", form) for form in _word_forms(payload))
        return tuple(views)

    def cased_views(self) -> Views:
        """(label, view) pairs with case kept, for case-sensitive markers ("DAN")."""
        return (("text", self.text), *(("decoded payload", p) for p in self.decoded))

    def data_views(self) -> tuple[str, ...]:
        """Views for data detectors (cards, phones, ids): case and digits intact."""
        return (self.text, *self.decoded)


def _clean(text: str) -> str:
    """NFKC, invisibles stripped, homoglyphs folded; spacing left as it was."""
    text = unicodedata.normalize("NFKC", text)
    text = INVISIBLE.sub("", text)
    return text.translate(_HOMOGLYPHS)


def _squash_spaces(text: str) -> str:
    # Horizontal runs become one space; line breaks are kept (chat-template markers such as
    # "\nSystem:" are line-anchored).
    return _NEWLINES.sub("\n", _SPACES.sub(" ", text)).strip()


def _strip_diacritics(text: str) -> str:
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", _COMBINING.sub("", unicodedata.normalize("NFD", text)))


def _deleet(words: str) -> str:
    def fix(match: re.Match[str]) -> str:
        token = match.group(0)
        return token.translate(_LEET) if _LEET_CHARS.intersection(token) else token

    return _LEET_TOKEN.sub(fix, words)


def _join_spaced(words: str) -> str:
    return _SPACED_RUN.sub(lambda m: _SPACED_SEP.sub("", m.group(0)), words)


def _edits(a: str, b: str, budget: int) -> int:
    """Edit distance (optimal string alignment: a swap of neighbours is one edit), or
    budget + 1 once it is certainly over the budget."""
    if abs(len(a) - len(b)) > budget:
        return budget + 1
    before, row = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1] and before:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > budget:
            return budget + 1
        before, row = row, current
    return row[-1]


@functools.lru_cache(maxsize=4096)
def misspelt_keyword(word: str) -> str | None:
    """The override keyword a lower-case word misspells, or None (see _TYPO_KEYWORDS)."""
    if word[0] not in _TYPO_FIRST or word in _TYPO_KEYWORDS or word in _REAL_WORDS:
        return None
    best: tuple[int, str] | None = None
    for keyword, budget in _TYPO_KEYWORDS.items():
        if keyword[0] != word[0] or word.startswith(keyword):
            continue
        edits = _edits(word, keyword, budget)
        if edits <= budget and (best is None or edits < best[0]):
            best = (edits, keyword)
    return best[1] if best else None


def respell(text: str) -> str:
    """`text` with misspelt override keywords replaced by the keyword (lower case)."""

    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        return misspelt_keyword(word.lower()) or word

    return _TYPO_TOKEN.sub(fix, text)


def fold(lowered: str) -> str:
    """Undo the common obfuscations on a lower-cased string whose spacing is still as typed
    (a double space between spaced-out words is what separates them), misspelt override
    keywords last."""
    folded = _join_spaced(lowered)
    folded = _deleet(folded)
    folded = _REPEATS.sub(r"\1", folded)
    return respell(_squash_spaces(folded))


def _word_forms(text: str) -> tuple[str, ...]:
    lowered = _strip_diacritics(_clean(text).lower())
    words = _squash_spaces(lowered)
    folded = fold(lowered)
    return (words,) if folded == words else (words, folded)


def _decode_base64(text: str) -> list[str]:
    payloads: list[str] = []
    for match in _BASE64.finditer(text):
        token = match.group(0)
        # Plain long words are valid base64 alphabets too: require a digit, '+', '/', '='
        # or mixed case before spending a decode on it.
        if token.isalpha() and (token.islower() or token.isupper()):
            continue
        raw = token.rstrip("=")
        raw += "=" * (-len(raw) % 4)
        try:
            decoded = base64.b64decode(raw.replace("-", "+").replace("_", "/"), validate=True)
            plain = decoded.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        plain = plain.strip()
        if len(plain) < 4:
            continue
        printable = sum(ch.isprintable() or ch.isspace() for ch in plain)
        letters = sum(ch.isalpha() or ch.isspace() for ch in plain)
        if printable / len(plain) >= _PRINTABLE_SHARE and letters / len(plain) >= _LETTER_SHARE:
            payloads.append(plain)
        if len(payloads) >= _MAX_PAYLOADS:
            break
    return payloads


def _decode_tags(text: str) -> list[str]:
    return ["".join(chr(ord(ch) - 0xE0000) for ch in run) for run in _TAG_CHARS.findall(text)]


def normalize(text: str) -> Normalized:
    """Build every view of `text`. Cost is linear in its length (~50 us for a question)."""
    cleaned = _clean(text)
    basic = _squash_spaces(cleaned)
    lowered = _strip_diacritics(cleaned.lower())
    words = _squash_spaces(lowered)
    folded = fold(lowered)
    decoded = tuple(_decode_tags(text) + _decode_base64(basic))
    return Normalized(
        original=text,
        text=basic,
        words=words,
        folded=folded,
        compact=_NON_ALNUM.sub("", folded),
        decoded=decoded,
        respelled=respell(basic),
    )
