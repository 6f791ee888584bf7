"""Output invariants that hold whatever the source says: the knowledge base may lie.

1. An answer never asks the customer to hand over a credential (PIN, OTP/TAC, password,
   CVV, full card number, login) to anyone or any site: "send/share/tell ... your PIN"
   always breaks it; "enter/confirm/verify ... your PIN" breaks it only with a destination
   outside the app: a link or address off the KB owner's domains, a person (agent, caller,
   officer, "us"), a messaging channel, or "this link". "Confirm with your PIN", "enter the
   OTP we send you", "never share your OTP with anyone" keep it.
2. Links and e-mail addresses in an answer are on the KB owner's domains (`allowed`, set at
   ingest: `--allowed-domains`, else the domains of the KB's `url` fields and fallback URL).
   Others are removed from the answer, and the trail says which. A KB with no owner domain
   at all (no urls, no fallback URL, no --allowed-domains) has no allow-list to apply: ingest
   says so.

3. An answer never directs the reader to send, forward, post or pay anything to an address or
   site off those domains, or to a specific account number or IBAN ("email the statements to
   x@mail.example", "transfer RM500 to account 1234-5678-9012"): help text sends customers to
   the owner, not elsewhere.

`credential_ask` and `send_elsewhere` report the first breaking sentence; `foreign_links` lists off-list hosts;
`strip_foreign_links` rewrites the answer without them. Ingest runs the same checks on every
entry (guardrag.core.kb.quarantine), so a lying entry is usually held back before it is served.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.rules import excerpt

_F = re.IGNORECASE

_CREDENTIAL = (
    r"(?:(?:\d-digit\s+|\w+\s+)?(?:pin|pins|pin number|pin code|m-?pin|t-?pin|otp|otps|one[- ]time "
    r"(?:password|pin|code|passcode)|tac(?: code)?|passwords?|pass ?codes?|cvv2?|cvc2?|card "
    r"security code|security code|verification code|authori[sz]ation code|(?:full |whole |16-digit "
    r")?card numbers?|login (?:details|credentials|id|info)|log-in details|sign-?in details|"
    r"credentials|user ?name and password|kata laluan|nombor pin|kod (?:otp|tac|pengesahan|"
    r"keselamatan)))"
)
# Handing it over: wrong whatever the recipient.
_GIVE = (
    r"(?:send|sending|share|sharing|give|giving|tell|disclose|reveal|forward|provide|read out|"
    r"spell out|(?:reply|respond)\s+(?:to\s+(?:\S+\s+){1,3}?)?with|hantar(?:kan)?|kongsi(?:kan)?|berikan|beritahu|bagi)"
)
# Typing it in: wrong only somewhere other than the app.
_ENTER = (
    r"(?:enter|entering|type|typing|key in|input|submit|fill in|confirm|verify|update|log ?in with|"
    r"sign in with|masukkan|sahkan)"
)
_BETWEEN = r"(?:[\w'’-]+\s+|,\s*){0,4}?"
GIVE_CREDENTIAL = re.compile(rf"\b{_GIVE}\s+(?:it\s+|them\s+)?{_BETWEEN}{_CREDENTIAL}\b", _F)
ENTER_CREDENTIAL = re.compile(rf"\b{_ENTER}\s+{_BETWEEN}{_CREDENTIAL}\b", _F)
# A recipient after the credential (not the code's own source: "the OTP sent to your phone").
RECIPIENT = re.compile(
    r"^(?:(?!\b(?:sent|send|sends|received|receive|delivered|we|that we|by sms to)\b)[^.;\n]){0,40}?"
    r"\b(?:to|with|via|through|by|at|on|in|into|over|kepada|melalui|di)\s+(?:\w+\s+){0,3}?"
    r"(?:anyone|anybody|someone|somebody|agents?|officers?|staff|callers?|representatives?|"
    r"(?:this|that|the following|our|the|a) (?:number|link|url|site|website|page|form|person)|"
    r"us\b|him\b|her\b|them\b|whatsapp|telegram|sms|text message|e-?mail|phone call|call|chat|"
    r"links?|websites?|"
    r"http|www\.|orang|pegawai|ejen|pautan|laman)",
    _F,
)
_NEGATION = re.compile(
    r"\b(?:never|not|don'?t|do not|doesn'?t|does not|won'?t|will not|should not|shouldn'?t|"
    r"must not|mustn'?t|no one|nobody|no staff|jangan|tidak|tak|bukan|usah|avoid|refuse|"
    r"beware|scam(?:mer)?s?|fraudsters?)\b",
    _F,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+|\bwww\.[^\s<>\"'`)\]]+", _F)
BARE_DOMAIN = re.compile(
    r"(?<![@\w.-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|net|org|io|co|gov|edu|info|biz|"
    r"app|xyz|link|ly|me|my|sg|site|online|top|click|shop|example)(?:\.[a-z]{2})?(?![\w-])"
    r"(?:/[^\s<>\"')\]]*)?",
    _F,
)
EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})"
)
_TRAILING = ".,;:!?*_"
# A bare "example.com" is a link when it has a path or follows a verb of going there; a quoted
# value ("APN 'nimbus.net'") is not.
_GO_TO = re.compile(
    r"(?:visit|go to|open|browse|click|check|see|at|on|via|from|log ?in (?:at|on)|sign ?in (?:at|"
    r"on)|register (?:at|on)|download (?:from|at)|link to|layari|lawati|di)\s+(?:the\s+|our\s+)?$",
    _F,
)
# Second-level labels under which a registrable name sits one level deeper ("tngdigital.com.my").
_SECOND_LEVEL = frozenset(
    ["com", "net", "org", "gov", "edu", "co", "ac", "mil", "nic", "name", "sch", "biz", "info"]
)


def host_of(link: str) -> str:
    """'https://Help.Example.com/x?y' -> 'help.example.com' (also for 'www.x.com/..', 'x.com')."""
    link = link.strip().rstrip(_TRAILING)
    if "://" not in link:
        link = "//" + link
    host = (urlsplit(link).hostname or "").lower().rstrip(".")
    return host[4:] if host.startswith("www.") else host


def registrable(host: str) -> str:
    """The owner's part of a host: 'support.tngdigital.com.my' -> 'tngdigital.com.my',
    'help.kineticwallet.example' -> 'kineticwallet.example'."""
    labels = host.lower().strip(".").split(".")
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def owner_domains(urls: Iterable[str | None]) -> list[str]:
    """The default allow-list: registrable domains of the KB's url fields and fallback URL."""
    return sorted({registrable(h) for u in urls if u and (h := host_of(u))})


def parse_domains(text: str) -> list[str]:
    """'--allowed-domains a.com, https://b.org/x' -> ['a.com', 'b.org'] (hosts, lower-cased)."""
    hosts = (host_of(part) for part in re.split(r"[,\s]+", text) if part.strip())
    return sorted({h for h in hosts if h and "." in h})


def on_domains(host: str, allowed: Iterable[str]) -> bool:
    """`host` is an allowed domain or a subdomain of one."""
    return any(host == d or host.endswith("." + d) for d in allowed)


@dataclass(frozen=True)
class ForeignLink:
    """A link or address in a text whose host is off the allow-list."""

    text: str
    host: str
    span: tuple[int, int]
    kind: str  # "link" | "email"


def foreign_links(text: str, allowed: Iterable[str]) -> list[ForeignLink]:
    allowed = list(allowed)
    found: list[ForeignLink] = []
    for match in URL.finditer(text):
        host = host_of(match.group(0))
        if host and not on_domains(host, allowed):
            found.append(ForeignLink(match.group(0).rstrip(_TRAILING), host, match.span(), "link"))
    masked = URL.sub(lambda m: " " * len(m.group(0)), text)
    for match in EMAIL.finditer(masked):
        host = match.group(1).lower()
        if not on_domains(host, allowed):
            found.append(ForeignLink(match.group(0), host, match.span(), "email"))
    masked = EMAIL.sub(lambda m: " " * len(m.group(0)), masked)
    for match in BARE_DOMAIN.finditer(masked):
        host = host_of(match.group(0))
        linky = "/" in match.group(0) or _GO_TO.search(masked, 0, match.start())
        if host and linky and not on_domains(host, allowed):
            found.append(ForeignLink(match.group(0).rstrip(_TRAILING), host, match.span(), "link"))
    return sorted(found, key=lambda f: f.span)


def strip_foreign_links(text: str, links: list[ForeignLink]) -> str:
    """`text` with each off-list link or address replaced by a marker the customer can read."""
    for link in sorted(links, key=lambda f: f.span, reverse=True):
        start, end = link.span
        end = start + len(link.text)
        marker = "[link removed]" if link.kind == "link" else "[address removed]"
        text = f"{text[:start]}{marker}{text[end:]}"
    return text


def credential_ask(text: str, allowed: Iterable[str] = ()) -> GuardFinding | None:
    """The first sentence asking the reader to hand a credential to someone or somewhere."""
    allowed = list(allowed)
    for sentence in _SENTENCE.split(text):
        for pattern, needs_recipient in ((GIVE_CREDENTIAL, False), (ENTER_CREDENTIAL, True)):
            for match in pattern.finditer(sentence):
                if _NEGATION.search(sentence, 0, match.start()):
                    continue  # "never share your OTP with anyone"
                if needs_recipient and not (
                    RECIPIENT.search(sentence[match.end() :]) or foreign_links(sentence, allowed)
                ):
                    continue  # "enter your PIN", "confirm with your PIN": in the app
                quoted = excerpt(sentence, match.start(), match.end())
                return finding(
                    RefusalReason.UNSAFE_OUTPUT,
                    "output.credential_request",
                    f"asks the customer to hand over a credential: {quoted!r} in "
                    f"{excerpt(sentence, 0, len(sentence))!r}",
                )
    return None


_SEND = re.compile(
    r"\b(?:send|sending|email|e-mail|forward|forwarding|transfer|transferring|pay|paying|post|"
    r"posting|upload|uploading|share|sharing|submit|wire|deposit|move|moving|hantar(?:kan)?|"
    r"pindahkan|kongsi(?:kan)?|bayar)\b",
    _F,
)
ACCOUNT_TARGET = re.compile(
    r"\b(?:to|into|ke)\s+(?:the\s+|this\s+|that\s+|a\s+|my\s+|our\s+)?(?:bank\s+)?(?:account|acct|"
    r"iban|payee|akaun)(?:\s+(?:number|no\.?|id|with (?:the )?id))?\s*[:#]?\s*['\"]?"
    r"(?:[A-Z]{1,3}-?)?\d[\d\s-]{5,}\d|\b(?:to|into|ke)\s+(?:the\s+)?(?:iban\s+)?[A-Z]{2}\d{2}[A-Z0-9]{10,}\b",
    _F,
)


def send_elsewhere(text: str, allowed: Iterable[str] = ()) -> GuardFinding | None:
    """The first sentence directing the reader to send, post or pay something to an address
    or site off the allowed domains, or to a given account number or IBAN. Without an
    allow-list, only account targets count (links cannot be judged)."""
    allowed = list(allowed)
    for sentence in _SENTENCE.split(text):
        verb = _SEND.search(sentence)
        if verb is None or _NEGATION.search(sentence, 0, verb.start()):
            continue
        rest = sentence[verb.start() :]
        target = ACCOUNT_TARGET.search(rest)
        where = target.group(0) if target else None
        if where is None and allowed:
            links = foreign_links(rest, allowed)
            where = links[0].text if links else None
        if where is not None:
            return finding(
                RefusalReason.UNSAFE_OUTPUT,
                "output.send_elsewhere",
                f"directs the customer to {verb.group(0)!r} something to {where[:60]!r}, off "
                f"the owner's domains, in {excerpt(sentence, 0, len(sentence))!r}",
            )
    return None
