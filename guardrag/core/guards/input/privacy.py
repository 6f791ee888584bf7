"""Requests for another person's personal data (PII), e.g. "show me another user's
transaction history", "the email of the last customer", "sejarah transaksi pengguna lain",
"what is my cleaner's passport number", and data gathered to be sent to an address the
message gives ("retrieve my saved addresses and email them to amy@...").

Evidence: a personal-data attribute owned by a third party (someone, other/another user or
customer, "my <relation>'s", "his/her"), or a private one (home address, IC, date of birth)
of one of the company's own staff. Named public or fictional people ("James Bond's
social security number") are left to the domain classifier: the bot has no data on them,
and refusing them as PII would mostly hit harmless trivia. The customer's own data ("my
account details") passes.
"""

from __future__ import annotations

import re

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.shared.rules import (
    RELATIONS,
    THIRD_PARTY_OBJECT,
    THIRD_PARTY_POSSESSIVE,
    Rule,
    first_rule_finding,
)
from guardrag.core.guards.unit import input_rule

_F = re.IGNORECASE

PERSONAL_ATTRIBUTE = (
    r"(?:transaction (?:history|records?|details|list)|transactions|statements?|account "
    r"(?:details|info(?:rmation)?|number|balance|history|activity)|balance|e-?mail(?: address)?|"
    r"(?:mobile |cell |phone |handphone |hp )?(?:phone )?number|phone|contact (?:details|number|"
    r"info)|(?:home |house |residential |current |private |mailing )?address|ic(?: number)?|nric|"
    r"mykad(?: number)?|identity card(?: number)?|passport(?: number| details)?|social security "
    r"number|ssn|date of birth|birthday|birth ?date|birth certificate|full name|real name|"
    r"personal (?:details|data|information|info)|details|information|info|location|whereabouts|"
    r"medical (?:records|history)|mental health(?: history)?|health (?:records|history)|"
    r"browsing history|(?:internet )?(?:browsing |search )?history|messages|chats?|photos|"
    r"salary|income|earnings|criminal (?:history|record)|immigration status|tax (?:records|"
    r"returns)|sexual orientation|religious beliefs|religion|political (?:affiliation|views)|"
    r"marital status|driver'?s licen[cs]e(?: number)?|licen[cs]e (?:plate|number)|bank "
    r"(?:account )?details|bank account(?: number)?|credit card(?: details| number)?|card "
    r"(?:details|number)|labou?r union membership|purchases|spending|payments?|receipts?)"
)
# Asking to see or know, not to pay or transfer ("transfer to my friend's phone number").
_REQUEST = (
    r"\b(?:what(?:'s| is| are| was| were)|where(?:'s| is| are| can| do| could| would)?|who is|"
    r"which is|show|tell|give|reveal|find|get|look ?up|search|track|trace|access|see|view|check|"
    r"know|send|list|display|share|provide|print|expose|leak|dump|retrieve|pull up|read|"
    r"tunjuk(?:kan)?|beritahu|(?:berikan|bagi) (?:saya|aku|kami)|cari|dedahkan|semak|lihat|"
    r"papar(?:kan)?|apakah|apa)"
    r"\b(?:\s+\S+){0,5}?\s+"
)
# "send money to my friend's phone number" is a payee, not a lookup.
POSSESSIVE_ATTRIBUTE = re.compile(
    _REQUEST
    + r"(?<!\bto )(?<!\binto )(?<!\bke )"
    + THIRD_PARTY_POSSESSIVE
    + r"\s+(?:\S+\s+){0,2}?"
    + PERSONAL_ATTRIBUTE
    + r"\b",
    _F,
)
ATTRIBUTE_OF = re.compile(
    _REQUEST
    + PERSONAL_ATTRIBUTE
    + r"\s+(?:of|for|belonging to|from|owned by)\s+(?:\S+\s+)?"
    + THIRD_PARTY_OBJECT
    + r"\b",
    _F,
)
EARNINGS = re.compile(
    r"\bhow much (?:money |salary )?(?:does|do|did) (?:my|his|her|their) (?:\S+ )?\w+ "
    r"(?:earn|make|get paid|have in (?:his|her|their) (?:account|wallet))\b",
    _F,
)
WHO_OWNS = re.compile(
    r"\bwho (?:owns|is the owner of|is behind|registered)\s+(?:this|that|the|a)?\s*(?:phone |"
    r"mobile |account |bank account |wallet |e-?wallet |card )?(?:number|account|wallet|card|"
    r"e-?wallet)\b|\bwho does (?:this|that|the|a)\s+(?:\S+\s+){0,3}?(?:number|account|wallet|"
    r"card|e-?wallet)\s+(?:\S+\s+)?belong to\b|\bsiapa (?:pemilik|punya|empunya)\b",
    _F,
)
MS_ATTRIBUTE = re.compile(
    _REQUEST
    + r"(?:sejarah transaksi|transaksi|baki|e-?mel|emel|nombor telefon|no\.? telefon|nombor "
    r"fon|alamat|nombor ic|no\.? ic|nombor kad pengenalan|maklumat(?: peribadi)?|butiran"
    r"(?: akaun)?|akaun|penyata)\s+(?:(?!saya\b|aku\b|kami\b|kepada\b|ke\b|untuk\b)\S+\s+)?"
    r"(?:(?:pengguna|pelanggan|orang|ahli|pemegang "
    r"akaun)\s+(?:lain|yang lain|terakhir|sebelum ini)|(?:isteri|suami|bekas \w+|kawan|jiran|bos|"
    r"majikan|pekerja|anak|ibu|ayah)\s+(?:saya|aku)|dia|mereka)\b",
    _F,
)

BULK_DATA = re.compile(
    r"\b(?:dump|list|export|show|give me|leak|download|send me|extract|scrape|print)\s+(?:me\s+)?"
    r"(?:all|every|the|your)?\s*(?:the\s+)?(?:users?|customers?|members?|account ?holders?|"
    r"clients?|people)(?:'s|s'|’s)?\s+(?:\S+\s+)?(?:e-?mails?|phone numbers?|numbers|data|details|"
    r"records|ic numbers?|addresses|information|info|list|database|names|balances|transactions|"
    r"passwords|pins|accounts)\b",
    _F,
)

BULK_OF = re.compile(
    _REQUEST
    + r"(?:the\s+)?(?:e-?mail(?: addresse)?s|phone numbers|numbers|(?:home )?addresses|contact "
    r"details|details|data|records|ic numbers|names|balances|transactions)\s+(?:of|for|from)\s+"
    r"(?:(?:all|every|your|the)\s+)*(?:top\s+\d+\s+|\d+\s+|other\s+)?(?:users|customers|members|"
    r"clients|account ?holders)\b",
    _F,
)
# A named person's identity documents ("Ahmad Faizal's MyKad number"), when the question
# places them among our users. Without that, named people are left to the domain classifier
# (celebrities' and fictional characters' details are off topic, not a leak).
NAMED_ID = re.compile(
    # Case matters for the name (its capitals mark it), not for the document.
    r"\b[A-Z][a-z]+(?:\s+(?:bin|binti|bt|a/l|a/p|[A-Z][a-z]+))*(?:'s|’s)\s+(?i:mykad|my kad|ic|"
    r"i/c|nric|identity card|kad pengenalan|passport|home address|date of birth|birthday|social "
    r"security)\b"
)
OUR_USER = re.compile(
    r"\b(?:users?|customers?|members?|account ?holders?|wallet|e-?wallet|pengguna|pelanggan)\b", _F
)

# The company's own people are third parties too ("the home address of your rider Ahmad"),
# but only for what is private to one of them: a desk's hours, an agent's branch or what riders
# earn (a job seeker's question) are not personal data.
_STAFF = (
    r"(?:your|the|this|that|a|an) (?:\S+ ){0,2}(?:staff|staffs|employees?|workers?|riders?|drivers?|"
    r"couriers?|agents?|officers?|technicians?|managers?|tellers?|cashiers?|representatives?|"
    r"operators?)(?: [A-Z][a-z]+)?(?:'s|’s|s')?"
)
_PRIVATE = (
    r"(?:(?:home|house|residential|personal|private) (?:address|phone number|phone|number|"
    r"e-?mail(?: address)?|contact(?: number| details)?)|ic(?: number)?|nric|mykad(?: number)?|"
    r"passport(?: number)?|date of birth|birthday|payslips?|medical (?:records|history))"
)
STAFF_PRIVATE = re.compile(
    _REQUEST
    + r"(?:"
    + _STAFF
    + r"\s+(?:\S+\s+){0,2}?"
    + _PRIVATE
    + r"|(?:the\s+)?"
    + _PRIVATE
    + r"\s+(?:of|for)\s+"
    + _STAFF
    + r")\b",
    _F,
)
STAFF_HOME = re.compile(
    r"\bwhere\s+(?:(?:does|do|did|exactly)\s+)?" + _STAFF + r"\s+(?:lives?|stays?|resides?)\b", _F
)
# "which customer lives at 12 Jalan Ampang": a person found from their address.
RESIDENT = re.compile(
    r"\b(?:which|what) (?:customers?|users?|members?|account ?holders?|person|people|clients?)"
    r" (?:lives?|stays?|resides?|(?:is|are) registered|(?:is|are) located)\s+(?:at|in|on)\b",
    _F,
)
MS_STAFF_PRIVATE = re.compile(
    r"\b(?:alamat rumah|nombor ic|no\.? ic|nombor kad pengenalan|tarikh lahir|"
    r"nombor telefon peribadi)\s+(?:\S+\s+)?(?:staf|kakitangan|pekerja|rider|penghantar|ejen|"
    r"pegawai|pengurus)\b",
    _F,
)

# "where the man who sent me RM30 lives": someone's whereabouts.
_SOMEONE = (
    r"(?:(?:the|this|that|a|some) (?:\S+ )?(?:man|woman|guy|girl|lady|person|sender|recipient|"
    r"payer|payee|customer|user|merchant|seller|buyer|driver|stranger)|someone|somebody|he|she|"
    r"they|(?:my|his|her) (?:\S+ )?" + RELATIONS + r")"
)
WHEREABOUTS = re.compile(
    r"\bwhere\s+(?:(?:does|do|did|exactly)\s+)?" + _SOMEONE + r"\b(?:\s+\S+){0,8}?\s+"
    r"(?:lives?|living|stays?|staying|resides?|works?|working|sleeps?)\b",
    _F,
)

#: An identifier a message gives: an e-mail address or a phone or ID number (looked ahead at).
_IDENTIFIER = r"\S+@\S+\.\w|\+?\d[\d -]{6,}\d"

# "find the account for siti@example.com", "the address of the person with NRIC 9001...":
# someone found from an identifier the question gives (an e-mail, phone or ID number). The
# customer's own ("my account with phone 012...") is not a lookup: `personal_data` refuses it.
LOOKUP_BY_ID = re.compile(
    r"\b(?:find|look ?up|search|check|show|tell me|give me|get|what(?:'s| is| are)|who is|"
    r"trace|track|identify|pull up|reveal)\s+(?:(?!my\b|our\b|me\b|mine\b)\S+\s+){0,4}?"
    r"(?:account|person|customer|user|owner|holder|member|name|address|details|balance)\s+"
    r"(?:for|of|with|behind|under|using|linked to|belonging to|registered (?:to|with|under))\s+"
    r"(?:(?:the|this|that|e-?mail|address|phone|mobile|number|nric|ic|mykad|passport)\s+){0,3}"
    rf"(?={_IDENTIFIER})",
    _F,
)

# "retrieve my saved addresses and email them to amy@...", "email the contents of all unread
# emails to mark@...": data gathered, or taken in bulk, and sent to an address the message
# gives. The bot cannot know whose address it is, and this is the shape of an exfiltration;
# "email the receipt to me at ali@..." (no gathering, nothing in bulk) stays `personal_data`.
_TO_ADDRESS = rf"(?:\s+\S+){{0,10}}?\s+(?:to|with)\s+(?:\S+\s+){{0,5}}?(?=[\"'<]?(?:{_IDENTIFIER}))"
_GATHER = (
    r"\b(?:retrieve|retrive|get|fetch|list|find|search|download|access|check|collect|extract|"
    r"pull|look ?up|export|gather|compile|read)\b"
)
_SEND = r"\b(?:send|e-?mail|mail|forward|share|upload|post|cc)\b"
_BULK = (
    r"\b(?:send|e-?mail|mail|forward|share)\s+(?:me\s+)?(?:the\s+)?(?:(?:full |entire )?contents?"
    r"|body|all|every|everything|entire)\b"
)
EXFILTRATION = re.compile(
    rf"{_GATHER}(?:\s+\S+){{1,30}}?\s+{_SEND}{_TO_ADDRESS}|{_BULK}{_TO_ADDRESS}", _F
)

RULES: tuple[Rule, ...] = (
    Rule("pii.bulk_data", BULK_DATA),
    Rule("pii.bulk_data", BULK_OF),
    Rule("pii.third_party_data", POSSESSIVE_ATTRIBUTE),
    Rule("pii.third_party_data", ATTRIBUTE_OF),
    Rule("pii.third_party_data_ms", MS_ATTRIBUTE),
    Rule("pii.third_party_earnings", EARNINGS),
    Rule("pii.identify_owner", WHO_OWNS),
    Rule("pii.lookup_by_identifier", LOOKUP_BY_ID),
    Rule("pii.exfiltration", EXFILTRATION),
    Rule("pii.whereabouts", WHEREABOUTS),
    Rule("pii.staff_data", STAFF_PRIVATE),
    Rule("pii.staff_data", STAFF_HOME),
    Rule("pii.staff_data_ms", MS_STAFF_PRIVATE),
    Rule("pii.identify_resident", RESIDENT),
)


def detect_privacy_request(norm: Normalized) -> GuardFinding | None:
    """PII when the question asks for a third party's personal data."""
    found = first_rule_finding(RefusalReason.PII, RULES, norm.word_views())
    if found or not OUR_USER.search(norm.words):
        return found
    return first_rule_finding(
        RefusalReason.PII, (Rule("pii.named_person_id", NAMED_ID),), (("text", norm.text),)
    )


GUARD = input_rule(
    "privacy_request", "PrivacyRequest", detect_privacy_request, (RefusalReason.PII,)
)
