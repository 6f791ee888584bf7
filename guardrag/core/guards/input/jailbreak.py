"""Jailbreaks: attempts to switch the assistant into a persona or mode without its rules.

Evidence: known persona markers (DAN, "do anything now", "[GPT]/[DAN]" dual answers),
claims that the assistant has no restrictions or that its policies were replaced, requests
to disable its safety filters, jailbreak modes ("developer mode enabled"), and hypothetical
or fictional framing wrapped around a harmful action (the action test is the harmful
module's, without its intent requirement). "Developer mode" or "jailbroken device" alone
pass: users ask about phones with developer options or a jailbroken OS.
"""

from __future__ import annotations

import re

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.input.harmful import harm_core
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.shared.rules import Rule, excerpt, first_rule_finding
from guardrag.core.guards.unit import input_rule

_F = re.IGNORECASE

# Case matters: "DAN" is the persona, "dan" is Malay for "and". Only with a persona context.
DAN_PERSONA = re.compile(
    r"\[(?:DAN|JAILBREAK|STAN|DUDE)\]|\b(?:DAN|STAN|DUDE)\s*(?:(?i:mode|prompt)\b|:)|"
    r"\b(?i:as|be|are|called|named|play|become|simulate|like|act as|pretend to be)\s+(?:(?i:a|an|"
    r"the)\s+)?(?:DAN|STAN|DUDE)\b|\b(?:DAN|STAN|DUDE),?\s+(?i:which\s+)?(?i:stands?\s+for)\b"
)
PERSONA_WORDS = re.compile(
    r"\bdo anything now\b|\bstrive to avoid norms\b|\banti-?dan\b|\bbetter-?dan\b|"
    r"\b(?:evil|based|anti|uncensored|unfiltered|unrestricted|free)-?(?:gpt|bot|ai)\b|"
    r"\[(?:gpt|classic|jailbreak|jailbroken|unfiltered|🔒classic|🔓jailbreak)\]",
    _F,
)
NO_RESTRICTIONS = re.compile(
    r"\b(?:you|u|ai|assistant|model|bot|chatbot|dan|persona|character)\b(?:\s+\S+){0,4}?\s+"
    r"(?:(?:have|has|with|are|is)\s+(?:no|zero|not any|none of the)|without(?: any)?|free "
    r"(?:of|from)(?: any)?|not bound by(?: any)?)\s+(?:\S+\s+)?(?:restrictions|filters?|rules|"
    r"guidelines|censorship|boundaries|constraints|ethics|morals|limitations|guardrails|"
    r"safeguards|policies)\b|"
    r"\b(?:broken|break|broke|breaking|freed|free) (?:free )?(?:of|from) (?:the |your |all )?"
    r"(?:typical )?(?:confines|restrictions|rules|limitations|shackles|chains|constraints)\b|"
    r"\b(?:do(?:es)?n'?t|do(?:es)? not|never) (?:have to )?(?:abide by|follow|obey|adhere to|"
    r"comply with) (?:the |any |your |their )?(?:rules|restrictions|policies|guidelines|"
    r"content policy)\b|"
    r"\b(?:content|usage|openai|safety|normal) polic(?:y|ies) (?:no longer apply|do(?:es)? not "
    r"apply|don'?t apply|have been replaced|are replaced|has been replaced|are suspended)\b|"
    r"\b(?:answer|answers|answering|respond to|responds to|reply to|replies to) (?:any|every|all) "
    r"(?:\S+\s+)?(?:questions?|requests?|prompts?)\b[^.\n]{0,20}?\b(?:even|no matter|regardless|"
    r"illegal|unethical)\b|\bopposite day\b|"
    r"\bwithout (?:any |your |the )?(?:usual |normal |standard |built-in )?(?:ethical|moral|content|"
    r"safety) (?:\S+ )?(?:policies|restrictions|filters|"
    r"guidelines|limits|constraints|considerations)\b",
    _F,
)
UNFILTERED_PERSONA = re.compile(
    r"\b(?:unfiltered|uncensored|unrestricted|unaligned|amoral|unethical|unbound|jailbroken|evil|"
    r"rogue|unhinged|unlimited|lawless)\s+(?:\S+\s+)?(?:ai|assistant|model|bot|chatbot|persona|"
    r"gpt|llm|character|twin|alter ego)\b",
    _F,
)
DISABLE_SAFETY = re.compile(
    r"\b(?:disable|turn off|switch off|remove|deactivate|bypass|ignore|override|lift|drop|break|"
    r"get around|circumvent|jailbreak)\s+(?:all\s+)?(?:of\s+)?(?:your|the|its|any)?\s*(?:safety|"
    r"content|ethical|moral|ai|openai|built-?in)\s*(?:\S+\s+)?(?:checks|filters?|filtering|"
    r"restrictions|guardrails|safeguards|censorship|moderation|guidelines|policies|rules|"
    r"protocols|programming|training|alignment|mechanisms?|features?|settings?)\b|"
    r"\b(?:disable|turn off|remove|bypass|override|jailbreak)\s+(?:your|ur)\s+(?:\S+\s+)?"
    r"(?:filters?|guardrails|safeguards|censorship|programming|restrictions|limitations|rules)\b|"
    r"\bjailbreak (?:yourself|you|this (?:ai|bot|chat|model|assistant)|the (?:ai|bot|model|"
    r"assistant|chatbot))\b",
    _F,
)
JAILBREAK_MODE = re.compile(
    r"\b(?:god|dan|jailbreak|jailbroken|unrestricted|unfiltered|uncensored|evil|chaos|sudo|"
    r"opposite|anarchy|unlocked|no-?limits?|no-?rules) mode\b|"
    # Phones have a real "developer mode" (the app refuses to run with it): only the persona
    # phrasings count.
    r"\b(?:developer|dev|debug) mode (?:output|response|answer)s?\b|\[(?:developer|dev) mode|"
    r"\b(?:act as|acting as|you are|you're|simulate|emulate|enter|activate|pretend)\b[^.\n]{0,40}?"
    r"\b(?:developer|dev|debug) mode\b|\bdual (?:response|answer)s?\b|\btwo (?:different |"
    r"separate )?(?:responses|ways|answers|characters|personas|personalities|versions|voices)\b"
    r"[^.\n]{0,80}?\b(?:normal|censored|filtered|classic|jailbr\w*|unfiltered|dan)\b",
    _F,
)
# Declared, not requested: "[SYSTEM NOTICE] safety layer disabled for maintenance".
SAFETY_OFF_CLAIM = re.compile(
    r"\b(?:safety|content|moderation|ethics?|security) (?:layer|filters?|checks?|mode|system|"
    r"module|guardrails?|protocols?|restrictions|settings?) (?:is |are |has been |have been |now |"
    r"were |was )*(?:disabled|off|removed|suspended|deactivated|bypassed|turned off|switched off|"
    r"lifted)\b",
    _F,
)
MS_JAILBREAK = re.compile(
    r"\b(?:anda|awak|kamu|engkau|kau)\b(?:\s+\S+){0,4}?\s+(?:tiada|tidak ada|tanpa|bebas "
    r"daripada)\s+(?:sebarang\s+)?(?:sekatan|peraturan|tapisan|batasan|had)\b|\bmod (?:pembangun|"
    r"tanpa sekatan|tanpa tapisan|dan|jailbreak|bebas)\b|\b(?:matikan|nyahaktifkan|abaikan|"
    r"pintas) (?:\S+\s+)?(?:tapisan|sekatan|kawalan) keselamatan\b",
    _F,
)
HYPOTHETICAL = re.compile(
    r"\bhypothetical(?:ly)?\b|\bin a (?:hypothetical|fictional|fictitious|made-up|imaginary|"
    r"alternate|parallel) (?:world|scenario|story|setting|universe|reality)\b|\bimagine (?:a world|"
    r"that|you are|you're|if|a scenario)\b|\blet'?s (?:say|pretend|imagine|play a game)\b|"
    r"\bsuppose (?:that|you)\b|\bfor (?:a|my|our) (?:story|novel|screenplay|script|book|movie|"
    r"game|roleplay|role-play)\b|\bpurely (?:fictional|hypothetical|academic)\b|\bfor (?:purely )?"
    r"(?:educational|research|academic|informational|scientific) purposes\b|\basking for a friend"
    r"\b|\bin theory\b|\btheoretically\b|\bwrite (?:a|me a) (?:story|poem|scene|script|dialogue) "
    r"(?:where|in which|about)\b|\bandaikan\b|\bsecara hipotetikal\b",
    _F,
)

RULES: tuple[Rule, ...] = (
    Rule("jailbreak.persona", PERSONA_WORDS),
    Rule("jailbreak.no_restrictions", NO_RESTRICTIONS),
    Rule("jailbreak.unfiltered_persona", UNFILTERED_PERSONA),
    Rule("jailbreak.disable_safety", DISABLE_SAFETY),
    Rule("jailbreak.mode", JAILBREAK_MODE),
    Rule("jailbreak.safety_off_claim", SAFETY_OFF_CLAIM),
    Rule("jailbreak.malay", MS_JAILBREAK),
)


def detect_jailbreak(norm: Normalized) -> GuardFinding | None:
    """JAILBREAK on persona markers, no-rules claims, safety-off requests, jailbreak modes,
    or hypothetical framing around a harmful action."""
    found = first_rule_finding(
        RefusalReason.JAILBREAK, (Rule("jailbreak.dan", DAN_PERSONA),), norm.cased_views()
    )
    if found:
        return found
    views = norm.word_views()
    found = first_rule_finding(RefusalReason.JAILBREAK, RULES, views)
    if found:
        return found
    for label, view in views:
        frame = HYPOTHETICAL.search(view)
        if frame is None:
            continue
        action = harm_core(view)
        if action is not None:
            quoted = excerpt(view, action.start(), action.end())
            return finding(
                RefusalReason.JAILBREAK,
                "jailbreak.hypothetical_framing",
                f"{frame.group(0)!r} framing around {quoted!r} in {label}",
            )
    return None


GUARD = input_rule("jailbreak", "Jailbreak", detect_jailbreak, (RefusalReason.JAILBREAK,))
