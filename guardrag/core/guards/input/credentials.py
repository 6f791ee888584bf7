"""Credentials: PINs, passwords, OTP/TAC codes and other secrets.

CREDENTIAL_REQUEST when the question (a) asks the bot to tell, send or generate a credential,
(b) asks what a given person's or system's credential is ("what is my eWallet PIN", "the
admin password"), or (c) asks how to get at a third party's credential: an attempt to get a
secret. A customer writing their own code into the message ("my OTP is 123456") is
`shared_secret`'s policy refusal, not an attack. Self-service questions pass: "I forgot my
PIN", "how do I reset my password", "should I share my OTP?", "what is OTP?".
"""

from __future__ import annotations

import re

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.input.harmful import has_intent
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.shared.rules import (
    THIRD_PARTY_OBJECT,
    THIRD_PARTY_POSSESSIVE,
    Rule,
    excerpt,
    first_rule_finding,
)
from guardrag.core.guards.unit import input_rule

_F = re.IGNORECASE

CREDENTIAL = (
    r"(?:pin(?: number| code|s)?|m-?pin|t-?pin|passwords?|pass ?codes?|passwd|pwd|otps?|"
    r"one[- ]time (?:password|pin|code|passcode)s?|tac(?: code)?s?|security (?:code|pin|question|"
    r"answer)s?|verification codes?|auth(?:entication|orization)? codes?|2fa codes?|login "
    r"(?:details|credentials|info|information|password)|(?:facebook|instagram|google|apple|email|"
    r"e-mail|bank|banking|account|gmail|icloud|tiktok|whatsapp|netflix) log-?in|sign-?in "
    r"(?:details|credentials)|"
    r"credentials|cvvs?|cvcs?|secret (?:key|code|question|answer|pin)|api keys?|private keys?|"
    r"seed phrases?|recovery (?:phrase|codes?)|kata laluan|kata kunci|nombor pin|kod (?:otp|tac|"
    r"pin|pengesahan|keselamatan|rahsia))"
)
# (a) the bot is told or asked to produce a credential. "Resend my OTP" is not here: a resent
# code goes to the registered phone, not into the chat, and customers ask for it all the time.
_ASK = (
    r"(?:(?:^|[.!?,;:\n]\s*)(?:(?:hey|hi|ok|okay|now|so|then|just),?\s+)?|\b(?:please|pls|plz|kindly|"
    r"can you|could you|would you|will you|can u|could u|i want you to|i need you to|you (?:must|"
    r"should|will|need to)|help me)\s+)"
)
_GIVE = (
    r"(?:tell|give|send|show|share|reveal|provide|display|list|read out|spell out|email|e-mail|"
    r"sms|text|whatsapp|forward|leak|dump|generate|make up|retrieve|recover|look up|"
    r"read(?: back| out)?|repeat|say|spell|disclose|print|output|confirm|get|find)"
)
# "Can you send me a new OTP?" asks for a fresh one, sent where codes go: a resend, too.
ASK_FOR_CREDENTIAL = re.compile(
    rf"{_ASK}{_GIVE}\s+(?:(?:me|us|him|her|them)\s+)?"
    r"(?!how\b|what\b|where\b|why\b|when\b|if\b|whether\b|about\b|the (?:steps|way|link)\b)"
    r"(?!(?:(?:me|us)\s+)?(?:an?\s+)?(?:new|fresh|another|second|replacement)\b)"
    rf"(?:\S+\s+){{0,4}}?{CREDENTIAL}\b",
    _F,
)
_OWNER = (
    r"(?:my|your|ur|his|her|their|our|its|" + THIRD_PARTY_POSSESSIVE + r"|(?:\S+)(?:'s|’s|s')|"
    r"(?:the\s+)?(?:admin|administrator|system|root|master|server|database|db|backend|"
    r"staff|agent|wifi|wi-fi|company|office|manager|merchant|developer|internal)\b)"
)
# (b) "what is my eWallet PIN?", "what's the admin password", "what is Ali's OTP".
WHAT_IS_CREDENTIAL = re.compile(
    rf"\bwhat(?:'s| is| are| was| were)\s+(?:the\s+)?{_OWNER}\s+(?:\S+\s+){{0,2}}?{CREDENTIAL}\b",
    _F,
)
WHAT_IS_THEIR_CREDENTIAL = re.compile(
    rf"\bwhat(?:'s| is| are| was)\s+(?:the\s+)?{CREDENTIAL}\b(?:\s+\S+){{0,5}}?\s+(?:of|for|"
    r"belonging to|owned by|on)\s+(?:\S+\s+)?" + THIRD_PARTY_OBJECT + r"\b",
    _F,
)
# (c) getting at another person's credential.
THIRD_PARTY_CREDENTIAL = re.compile(
    r"\b(?:get|find|know|obtain|see|access|steal|crack|guess|hack|bypass|break|phish|recover|"
    r"retrieve|reset|change|use|learn|figure out|find out|intercept|sniff|capture|read|bypass|"
    r"unlock|dapatkan|cari|tahu|curi|guna)\s+(?:out\s+)?(?:\S+\s+){0,2}?(?:"
    + THIRD_PARTY_POSSESSIVE
    + rf"|his|her|their)\s+(?:\S+\s+){{0,2}}?{CREDENTIAL}\b",
    _F,
)
ATTACK_CREDENTIAL = re.compile(
    r"\b(?:steal|stealing|crack|cracking|guess|guessing|brute[- ]?forc(?:e|ing)|phish|phishing|"
    r"intercept|intercepting|sniff|sniffing|harvest|harvesting|bypass|bypassing|skim|skimming|"
    r"dump|dumping)\s+(?:\S+\s+){0,3}?" + CREDENTIAL + r"\b",
    _F,
)
MS_CREDENTIAL = re.compile(
    r"\b(?:apakah|apa|berapa)\s+(?:nombor\s+)?(?:pin|kata laluan|otp|tac|kod \w+)\s+(?:saya|aku|"
    r"dia|mereka|orang lain|pengguna lain|\w+ (?:saya|dia))\b|"
    # An imperative, not "bolehkah saya kongsi OTP ..." (may I share my OTP: a safety question).
    r"(?<!saya )(?<!aku )(?<!kami )(?<!boleh )(?<!bolehkah )(?<!patut )(?<!perlu )(?<!perlukah )"
    r"(?<!jangan )(?<!tidak )(?<!tak )(?<!nak )(?<!untuk )"
    r"\b(?:beritahu|berikan|beri(?=\s+(?:saya|aku|kami)\b)|bagi|hantar|"
    r"tunjukkan|kongsi(?:kan)?|hantarkan)\s+(?:saya|aku|kami)?\s*(?:\S+\s+){0,3}?(?:pin|kata "
    r"laluan|otp|tac|kod (?:otp|tac|pengesahan|keselamatan))\b|\b(?:pin|kata laluan|otp|tac)\s+"
    r"(?:akaun\s+)?(?:orang lain|pengguna lain|dia|mereka|(?:isteri|suami|kawan|jiran|abang|kakak|"
    r"adik|ibu|ayah|emak|mak|bapa|anak|bos|majikan|pekerja|teman wanita|teman lelaki|bekas \w+)"
    r"\s+(?:saya|aku))\b",
    _F,
)

RULES: tuple[Rule, ...] = (
    Rule("credentials.ask_bot", ASK_FOR_CREDENTIAL),
    Rule("credentials.what_is", WHAT_IS_CREDENTIAL),
    Rule("credentials.what_is", WHAT_IS_THEIR_CREDENTIAL),
    Rule("credentials.third_party", THIRD_PARTY_CREDENTIAL),
    Rule("credentials.malay", MS_CREDENTIAL),
)


def detect_credentials(norm: Normalized) -> GuardFinding | None:
    """CREDENTIAL_REQUEST when the question asks for a credential or attacks one."""
    views = norm.word_views()
    found = first_rule_finding(RefusalReason.CREDENTIAL_REQUEST, RULES, views)
    if found:
        return found
    # Attacks on credentials count when asked for ("how do I phish OTPs"), not when a victim
    # asks how they happen ("how do scammers steal OTP codes?").
    for label, view in views:
        for match in ATTACK_CREDENTIAL.finditer(view):
            if has_intent(view, match.start(), match.end(), 0):
                quoted = excerpt(view, match.start(), match.end())
                return finding(
                    RefusalReason.CREDENTIAL_REQUEST,
                    "credentials.attack",
                    f"matched {quoted!r} in {label}",
                )
    return None


GUARD = input_rule(
    "credentials", "Credentials", detect_credentials, (RefusalReason.CREDENTIAL_REQUEST,)
)
