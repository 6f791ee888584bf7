"""Harmful requests: asking how to hurt people, commit crimes (fraud, theft, hacking other
people's accounts, laundering, getting around KYC or limits), make weapons, get drugs, or
harm oneself.

Evidence is an *action* from one of the families below, usually preceded in the same
sentence by an *intent frame* ("how do I", "best way to", "teach me", "cara nak"). Victims'
questions pass because the action is passive or framed by a counter-verb ("my account was
hacked", "how do I report a scam", "how can I stop someone stealing ..."), and the violence
and property families skip fiction, game and sport contexts named by a common noun ("in
my novel", "in a chess game") or by a well-known video game's title ("in Call of Duty", "in GTA
4": `GAME_TITLES`), unless the sentence puts it back into the world ("in real life");
a title not listed still fires. Self-harm fires without an intent frame (the rule name lets the pipeline answer
it with a helpline message rather than a plain refusal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding, finding
from guardrag.core.guards.shared.normalize import Normalized
from guardrag.core.guards.shared.rules import RELATIONS, THIRD_PARTY_POSSESSIVE, excerpt
from guardrag.core.guards.unit import input_rule

_F = re.IGNORECASE

# --- intent frames -----------------------------------------------------------------------
INTENT = re.compile(
    r"\bhow (?:do|can|could|would|should|might|will|does one|to|would one|can one|could one)\b|"
    r"\bhow i (?:can|could|should|would)\b|\bways? (?:of|to|for)\b|"
    r"\b(?:best|easiest|quickest|fastest|simplest|good|safest|effective|cheapest|surest|right|"
    r"perfect|smartest|cleanest)\s+(?:\w+\s+)?(?:way|ways|method|methods|place|places|strategy|"
    r"plan|technique|techniques|time|tool|tools|trick|tricks)\b|"
    r"\b(?:teach|show|tell|help|guide|walk|coach|train) (?:me|us)\b|\bexplain (?:to me )?how\b|"
    r"\btutorial\b|\bstep[- ]by[- ]step\b|\binstructions? (?:for|on|to)\b|"
    r"\bi (?:want|need|plan|intend|wish|would like|am going|'m going|am planning|'m planning|"
    r"am trying|'m trying|'d like|have) to\b|\bi(?:'m| am)? (?:wanna|gonna|gotta)\b|"
    r"\bi (?:need|want|would like|'d like) (?:a|an|some|the)\b|\brecommend (?:a|some|the best)\b|"
    r"\bwhere (?:can|do|could|should|would|to) (?:i|we|one|you)?\b|"
    r"\bwhat (?:steps|do i need|can i|should i|would i|must i|is needed|tools|would you need|"
    r"do you need|equipment|materials|ingredients|chemicals)\b|\bsteps (?:to|for|i should|"
    r"should i)\b|\bprocess (?:for|of)\b|\bcan (?:i|you|we|someone)\b|\bcould (?:i|you|we)\b|"
    r"\bshould (?:i|we)\b|\bis (?:there|it possible)\b|\bany (?:way|tips|tricks|advice) (?:to|for|"
    r"on)\b|\btips (?:on|for|to)\b|\b(?:give|provide|send|write) (?:me|us) (?:a |an |some )?"
    r"(?:way|method|guide|tips|instructions|recipe|plan|script|code|template)\b|\bget away with\b|"
    r"\blet me know how\b|\bplan(?:ning)? (?:to|for|on)\b|\brecipe for\b|\bhelp (?:me|us) to\b|"
    # Malay
    r"\b(?:bagaimana(?:kah)?|macam ?mana|camne|camana|gimana)\b|\bcara(?:-cara)?\b|"
    r"\b(?:ajar|ajarkan|tunjuk(?:kan)?|beritahu|terangkan|bagi ?tahu) (?:saya|aku|kami|kita)\b|"
    r"\b(?:saya|aku|kami) (?:nak|mahu|ingin|hendak|perlu|mau)\b|\b(?:di ?mana|mana) (?:boleh|nak|"
    r"saya|aku)\b|\bboleh(?:kah)? (?:saya|aku|anda|awak)\b",
    _F,
)
# A victim's or bystander's framing between the intent and the action.
COUNTER = re.compile(
    r"\b(?:report|prevent|avoid|detect|protect|stop|recogni[sz]e|spot|identify|deal with|handle|"
    r"recover|fight|combat|learn about|know|tell if|check if|block|secure|escape|survive|treat|"
    r"explain|define|understand|defend|safeguard|warn|notify|flag|dispute|claim|refund|cancel|"
    r"freeze|lock|unblock|reset|if|when|whether|after|because|since|in case|once|was|were|got|"
    r"did|does|scammers?|hackers?|fraudsters?|criminals?|thieves|thief|crooks?|attackers?|"
    r"they|penipu|penggodam|"
    r"been|being|lapor|laporkan|elak|elakkan|cegah|lindungi|jika|kalau|sekiranya|apabila)\b",
    _F,
)
SENTENCE_END = re.compile(r"[.!?\n;]")
_MAX_GAP = 120

#: Video games asked about by title ("in Call of Duty"): a context, not a plan.
GAME_TITLES = (
    r"call of duty|gta(?: ?(?:[ivx]+|\d+|online))?|grand theft auto(?: ?(?:[ivx]+|\d+))?|"
    r"minecraft|fortnite|roblox|skyrim|elder scrolls|hitman|counter-strike|cs ?go|valorant|"
    r"overwatch|apex legends|pubg|league of legends|dota ?2?|world of warcraft|the sims|"
    r"red dead redemption(?: ?2)?|assassin'?s creed|far cry|rainbow six|pok[eé]mon|zelda|"
    r"dark souls|elden ring|the last of us|cyberpunk 2077|resident evil|mortal kombat|"
    r"street fighter|tekken|dayz|terraria"
)
#: Words that put a fiction or game context back into the world ("in real life, not in GTA").
REAL_WORLD = re.compile(r"\b(?:real life|in reality|for real|irl|real world)\b", _F)
# Contexts where violent verbs are about fiction, games or sport, not people.
FICTION_CONTEXT = re.compile(
    r"\b(?:game|games|video ?games?|gaming|in-game|level|mission|quest|boss fight|novel|book|"
    r"story|short story|fiction|fictional|film|movie|tv show|show|series|episode|play|script|"
    r"screenplay|scene|character|comic|anime|manga|cartoon|fake|prop|props|tabletop|d&d|chess|"
    r"checkers|draughts|poker|board game|card game|sport|match|tournament|boxing|judo|karate|"
    r"mma|wrestling|fencing|sparring|paintball|laser tag|airsoft|shooting range|simulator)\b"
    rf"|\bin (?:the )?(?:{GAME_TITLES})\b",
    _F,
)

# --- action families ---------------------------------------------------------------------
_HUMAN = (
    r"(?:(?:some|any|every)(?:one|body)(?: else)?|(?:a |an |the |this |that |some |these |those |"
    r"innocent |random |\d+ )?(?:person|persons|human|humans|human beings?|humanity|people|"
    r"individual|man|men|woman|women|girl|girls|boy|boys|child|children|kid|kids|baby|babies|"
    r"toddler|toddlers|infant|teen|teenager|minor|minors|stranger|strangers|cop|cops|police(?:man|"
    r"men| officers?)?|soldier|politician|president|prime minister|senator|judge|journalist|"
    r"crowd|civilians?|immigrants?|refugees?|foreigners?|minorit(?:y|ies)|population|villagers?|"
    r"village|jews|muslims|christians|hindus|buddhists|gays|homeless|classmates?|students?)|"
    r"(?:my|his|her|their|your|our|a|the) (?:\S+ )?" + RELATIONS + r"|"
    r"\w+ people|(?:gay|black|white|asian|jewish|muslim|christian|hindu|roma|trans|disabled|"
    r"elderly|rural|indigenous|malay|chinese|indian) (?:people|persons|men|women|folks|kids|"
    r"children|families|community|communities|neighbou?rs?|workers|students)|"
    r"(?:someone|somebody|(?:a|an|the) (?:\S+ )?(?:person|human|child|kid|baby|toddler|woman|man|"
    r"girl|boy|stranger|cop|officer|victim)|(?:my|his|her|their) \S+(?: \S+)?)(?:'s|s') (?:\S+ )?"
    r"(?:head|skull|face|neck|throat|spine|sternum|legs?|arms?|kidneys?|body|heart|life|drink|"
    r"food|tires|tyres|brakes|pet|dog|cat)|a (?:dead )?body|dead bod(?:y|ies)|human "
    r"(?:skull|head|spine|body|bodies|heart))"
)
_VIOLENT_VERB = (
    r"(?:kill(?:s|ing)?|murder(?:s|ing)?|stab(?:s|bing)?|shoot(?:s|ing)?|strangl(?:e|es|ing)|"
    r"chok(?:e|es|ing)|throttl(?:e|es|ing)|suffocat(?:e|es|ing)|smother(?:s|ing)?|"
    r"drown(?:s|ing)?|poison(?:s|ing)?|behead(?:s|ing)?|decapitat(?:e|es|ing)|tortur(?:e|es|ing)|"
    r"kidnap(?:s|ping)?|abduct(?:s|ing)?|assault(?:s|ing)?|beat(?:s|ing)?(?: up)?|hurt(?:s|ing)?|"
    r"harm(?:s|ing)?|injur(?:e|es|ing)|maim(?:s|ing)?|attack(?:s|ing)?|punch(?:es|ing)?|"
    r"kick(?:s|ing)?|hit(?:s|ting)?|slap(?:s|ping)?|smash(?:es|ing)?(?: in)?|crush(?:es|ing)?|"
    r"break(?:s|ing)?(?: open)?|crack(?:s|ing)? open|butcher(?:s|ing)?|gut(?:s|ting)?|"
    r"execut(?:e|es|ing)|eliminat(?:e|es|ing)|eradicat(?:e|es|ing)|exterminat(?:e|es|ing)|"
    r"annihilat(?:e|es|ing)|wip(?:e|es|ing) out|liquidat(?:e|es|ing)|terminat(?:e|es|ing)|"
    r"slay(?:s|ing)?|snip(?:e|es|ing)|burn(?:s|ing)?|set fire to|hang(?:s|ing)?|"
    r"dispos(?:e|es|ing) of|do away with|hunt(?:s|ing)? down|overpower(?:s|ing)?|"
    r"tackl(?:e|es|ing)|captur(?:e|es|ing)|rap(?:e|es|ing)|molest(?:s|ing)?|"
    r"traffic(?:king)?|enslav(?:e|es|ing)|stalk(?:s|ing)?|blackmail(?:s|ing)?|extort(?:s|ing)?|"
    r"harass(?:es|ing)?|threaten(?:s|ing)?|bully(?:ing)?|doxx?(?:ing)?|spik(?:e|ing)|drug(?:ging)?|"
    r"starv(?:e|es|ing)|chop(?:s|ping)? up|cut(?:s|ting)? (?:off|up|open)|saw(?:ing)?|"
    r"hammer(?:ing)?|rip(?:ping)? off|decimat(?:e|es|ing)|massacr(?:e|es|ing)|shatter(?:s|ing)?|"
    r"slaughter(?:s|ing)?|destroy(?:s|ing)?|ruin(?:s|ing)?|euthani[sz](?:e|es|ing)|run over|"
    r"lynch(?:es|ing)?|mutilat(?:e|es|ing)|disfigur(?:e|es|ing)|paralys(?:e|ing)|paralyz(?:e|ing)|"
    r"bunuh|membunuh|pukul|memukul|tikam|menikam|culik|menculik|cederakan|mencederakan)"
)
# A person directly followed by "'s" is an owner ("terminate my son's account"), not the
# target; owned body parts and lives are listed in _HUMAN explicitly.
# Slang objects: "shoot money to my friend", "hit my sister with a payment request".
_NOT_VIOLENT = (
    r"(?!\s+(?:(?:some|the|my|a|an)\s+)?(?:money|cash|funds|payments?|transfers?|messages?|texts?|"
    r"e-?mails?|requests?|photos?|pictures?|videos?|invites?|links?|duitnow|rm\s?\d)\b)"
)
#: "Break someone's heart" is the idiom for hurting their feelings, not their body.
_BROKEN_HEART = r"(?!break(?:s|ing)?\s+(?:\S+\s+){0,4}?hearts?\b)"
VIOLENCE = re.compile(
    rf"\b{_BROKEN_HEART}{_VIOLENT_VERB}\b{_NOT_VIOLENT}\s+(?:\S+\s+){{0,3}}?{_HUMAN}(?![a-z])(?!['’]s\b|s['’])|"
    rf"\bpush(?:es|ing)?\s+(?:\S+\s+){{0,2}}?{_HUMAN}\s+(?:off|down|out of|in front of|into)\b|"
    rf"\b(?:people|someone|somebody|a person|victims|targets) to {_VIOLENT_VERB}\b|"
    r"\b(?:take|taking|hold|holding|keep|keeping)\s+(?:\S+\s+){0,3}?hostage\b",
    _F,
)
PLAN_DEATH = re.compile(
    r"\b(?:plan|planning|arrange|cause|causing)\s+(?:\S+\s+)?(?:someone|somebody|a person|"
    r"(?:my|his|her|their) \S+)(?:'s|s') (?:death|murder|assassination|accident|overdose)\b",
    _F,
)
_PROPERTY = (
    r"(?:house|home|building|hospital|school|church|mosque|temple|synagogue|office|concert|"
    r"stadium|station|airport|city|town|village|army base|military base|embassy|mall|bank|"
    r"bank vault|vault|car|cars|bus|train|plane|factory|police station|shop|store|restaurant|"
    r"bridge|power plant|motorbike|bike|tires|tyres|casino|atm|gas station|petrol station)"
)
_THIRD_PARTY_THING = THIRD_PARTY_POSSESSIVE + r"\s+(?:\S+\s+)?\w+"
PROPERTY = re.compile(
    # Explosives and fire: any building or vehicle, one's own included.
    r"\b(?:blow(?:ing)? up|bomb(?:ing)?|set(?:ting)? fire to|burn(?:ing)? down|torch(?:ing)?|"
    r"firebomb(?:ing)?|shoot(?:ing)? up|nuk(?:e|ing)|obliterat(?:e|ing)|level(?:ling)?|"
    r"flatten(?:ing)?)\s+(?:" + _THIRD_PARTY_THING + r"|(?:a|an|the|my|this|that|our|"
    r"an entire|the entire|a whole|the whole)?\s*(?:\S+\s+)?" + _PROPERTY + r")\b|"
    r"\bset(?:ting)?\s+(?:a|an|the|my|his|her|their|someone'?s)\s+(?:\S+\s+)?"
    + _PROPERTY
    + r"\s+on fire\b|\bmake\s+(?:"
    + THIRD_PARTY_POSSESSIVE
    + r"|a|the)\s+(?:\S+\s+)?"
    + _PROPERTY
    + r"\s+explode\b|"
    # Damage and break-ins: only other people's property, or a public target.
    r"\b(?:destroy(?:ing)?|demolish(?:ing)?|wreck(?:ing)?|vandali[sz](?:e|ing)|smash(?:ing)?|"
    r"slash(?:ing)?|key(?:ing)?|damag(?:e|ing)|sabotag(?:e|ing)|break(?:ing)? into|broke into|"
    r"rob(?:bing)?|burgl(?:e|ing|arize))\s+(?:" + _THIRD_PARTY_THING + r")\b|"
    r"\b(?:break(?:ing)? into|broke into|rob(?:bing)?|burgl(?:e|ing|arize))\s+(?:a|an|the)\s+"
    r"(?:\S+\s+)?" + _PROPERTY + r"\b|"
    r"\b(?:disable|disabling|cut|cutting|bypass|bypassing|deactivate|jam|jamming)\s+(?:the\s+)?"
    r"(?:alarms?|security (?:system|cameras?)|cctv|cameras?|locks?)\s+(?:in|of|at|on)\s+(?:a|an|"
    r"the)?\s*(?:\S+\s+)?(?:bank|vault|store|shop|house|museum|jewel\w*|atm|office)\b",
    _F,
)
_WEAPON = (
    r"(?:bombs?|pipe ?bombs?|explosives?|ieds?|grenades?|molotovs?(?: cocktails?)?|napalm|"
    r"thermite|detonators?|guns?|firearms?|pistols?|rifles?|weapons?|ghost guns?|silencers?|"
    r"suppressors?|ammunition|ammo|nerve agents?|sarin|ricin|anthrax|bio-?weapons?|"
    r"chemical weapons?|poison gas|mustard gas|chlorine gas|dirty bombs?|nuclear (?:bombs?|"
    r"weapons?)|poisons?|bom|senjata api|bahan letupan)"
)
WEAPONS = re.compile(
    r"\b(?:make|making|build|building|create|creating|assemble|construct|manufactur(?:e|ing)|"
    r"get (?:my|our) hands on|"
    r"3d[- ]?print(?:ing)?|print|craft|cook|mix|get|getting|buy|buying|obtain|acquire|smuggle|"
    r"hide|conceal|detonate|plant|set off|explode|exploding|detonating|planting|buat|membuat|"
    r"beli|dapatkan|hasilkan)\s+(?:\S+\s+){0,3}?" + _WEAPON + r"\b(?<!bath bomb)(?<!photo bomb)",
    _F,
)
_DRUG_STRONG = (
    r"(?:cocaine|heroin|meth|methamphetamine|crystal meth|lsd|mdma|fentanyl|ketamine|opium|"
    r"marijuana|marihuana|cannabis|hashish|ganja|ghb|pcp|psilocybin|magic mushrooms|"
    r"ecstasy (?:pills?|tablets?)|drugs|illegal drugs|narcotics|dadah|syabu|kokain|ekstasi|"
    r"pil khayal|ketum)"
)
# coke/crack/weed/ecstasy/pot/acid... only count with a quantity or a drug-use verb.
_DRUG_AMBIGUOUS = (
    r"(?:(?:some|a gram of|grams of|an ounce of|a bag of|a line of|a hit of|a baggie of|a pound "
    r"of|a kilo of|\d+ ?(?:g|grams?|kg) of)\s+(?:coke|crack|weed|ecstasy|molly|pot|grass|acid|"
    r"speed|ice|smack|hash|blow|dope)|(?:crack|coke|weed|pot|hash|ice|speed|dope)(?= at home|"
    r" in the street| on the street| online|$|[?.!]))"
)
DRUGS = re.compile(
    r"\b(?:buy|buying|get|getting|obtain|find|score|purchase|order|make|making|cook|cooking|"
    r"produce|synthesi[sz]e|synthesi[sz]ing|grow|growing|cultivate|extract|sell|selling|deal|"
    r"dealing|smuggle|smuggling|traffic|import|ship|hide|smoke|inject|snort|beli|jual|buat|"
    r"hasilkan|dapatkan|edar|mengedar|seludup|tanam)\s+(?:\S+\s+){0,2}?(?:"
    + _DRUG_STRONG
    + r"|"
    + _DRUG_AMBIGUOUS
    + r")\b",
    _F,
)
SELF_HARM = re.compile(
    r"\b(?:kill|hang|drown|hurt|harm|poison|shoot|starve|burn|stab|suffocate|overdose|cut)\s+"
    r"(?:my ?self|myself)\b|\b(?:end|take|ending|taking) my (?:own )?life\b|\bcommit(?:ting)? "
    r"suicide\b|\bsuicide (?:methods?|note|plan)\b|\b(?:want|going|plan|planning) to die\b|"
    r"\b(?:sever|cut|slit|slash|pierce|open) (?:my )?(?:own )?(?:\w+ )?(?:wrists?|arter(?:y|ies)|"
    r"veins?|throat)\b|\bcarve (?:\S+\s+){0,3}?into my (?:arm|skin|wrist|leg|body|thigh)\b|"
    r"\boverdose on\b|\b(?:bunuh|membunuh|cederakan|mencederakan) diri\b|\b(?:nak|ingin|mahu) "
    r"mati\b|\bpotong (?:urat|pergelangan) tangan\b|"
    r"\b(?:do ?n[o']?t|no longer|never) want to (?:live|be alive|exist|wake up)\b|"
    r"\b(?:jump|leap)\w* (?:off|from)\b[^.?!\n]{0,40}?\b(?:die|not survive|end (?:it|my life)|"
    r"kill)\b|\bhigh enough to (?:jump|die|kill)\b|"
    r"\b(?:tak|tidak|x) (?:mahu|mau|nak|ingin|larat) hidup\b|\btamatkan (?:hidup|nyawa)\b",
    _F,
)
# "go out like" / "die like <someone>" only counts with an intent frame (see FAMILIES).
SELF_HARM_EMULATE = re.compile(
    r"\b(?:die|go out|end it|end my life) like\b|\b(?:pills?|much|dose) (?:\S+\s+){0,3}?to die\b",
    _F,
)
_HACK_TARGET = (
    r"(?:" + THIRD_PARTY_POSSESSIVE + r"|(?:his|her|their)\s+(?:\S+\s+)?(?:account|wallet|"
    r"e-?wallet|phone|email|card|bank)|(?:some|any)(?:one|body)|other people|another (?:person|"
    r"user|customer)|other (?:users|customers|accounts)|a stranger|(?:an?|the) (?:\S+ )?"
    r"accounts? (?:of|belonging to|owned by)|(?!my\b|our\b|own\b)(?:\S+\s+)?(?:users|customers|"
    r"victims|members|accounts|e-?wallets|wallets))"
)
HACKING = re.compile(
    r"\b(?:hack|hacks|hacking|crack|cracking|break into|breaking into|brute[- ]?forc(?:e|ing)|"
    r"phish|phishing|take over|taking over|hijack|hijacking|compromise|get into|log ?into|"
    r"spy on|snoop on|snooping on|access|accessing|clone|cloning|skim|skimming|sneak into|"
    r"sneaking into|snoop (?:around )?in|peek into|go through|look through)\s+(?:\S+\s+){0,2}?"
    + _HACK_TARGET
    + r"|(?<!life )(?<!growth )\b(?:hack|hacking|godam|menggodam|hek)\b(?!-?proof| ?athon)"
    r"(?!\s+(?:my|into my|back|saya|aku))|"
    # SIM cloning / swapping, and reading someone else's codes.
    r"\b(?:clone|cloning|swap|swapping|duplicate|duplicating|hijack|hijacking|port|porting)\s+"
    r"(?:\S+\s+){0,2}?sim(?: cards?)?\b|\b(?:receive|get|read|see|intercept|redirect|forward)\s+"
    r"(?:\S+\s+){0,2}?" + THIRD_PARTY_POSSESSIVE + r"\s+(?:\S+\s+)?(?:otps?|tacs?|sms|codes|"
    r"messages|texts|verification codes)\b|"
    r"\b(?:godam|menggodam|ceroboh|menceroboh|curi|mencuri)\s+(?:\S+\s+){0,2}?"
    r"(?:akaun|kata laluan|wang|duit|maklumat|e-?wallet)\s+(?:\S+\s+)?(?:orang lain|pengguna "
    r"lain|orang|dia|mereka|kawan|isteri|suami)\b",
    _F,
)
_FIGURATIVE = (
    r"(?:heart|hearts|show|spotlight|limelight|scene|glance|kiss|moment|thunder|base|bases|"
    r"the ball|a look|attention|ideas?|sleep|time)"
)
THEFT = re.compile(
    r"\b(?:steal|stealing|stole|rob|robbing|mug|mugging|shoplift\w*|pickpocket\w*|burgl\w*|"
    r"loot\w*|embezzl\w*|swindl\w*|carjack\w*|hotwir\w*)\b(?!\s+(?:a |the |someone'?s |"
    r"somebody'?s |my |his |her |their )?" + _FIGURATIVE + r"\b)",
    _F,
)
_KYC = (
    r"(?:kyc|ekyc|e-kyc|identity verification|id verification|verification checks?|"
    r"face (?:verification|recognition|scan)|liveness (?:check|detection)|aml|anti-money "
    r"laundering|fraud (?:checks?|detection|system)|transaction limits?|wallet limits?|daily "
    r"limits?|reload limits?|spending limits?|transfer limits?|limits|sanctions|security checks?|"
    r"2fa|otp|tac|had transaksi|pengesahan identiti)"
)
FRAUD = re.compile(
    r"\blaunder\w*(?:\s+\S+){0,3}?\s+(?:money|funds|cash|proceeds)|\bmoney[- ]launder\w*|"
    r"\bwash (?:dirty |the |my )?money\b|\bclean (?:dirty|black) money\b|\bcuci (?:wang|duit)\b|"
    r"\bpengubahan wang haram\b|"
    r"\b(?:commit|committing|run|running|pull off|set up|start|organi[sz]e)\s+(?:a |an |some )?"
    r"(?:\w+ ){0,2}(?:fraud|scams?|ponzi(?: scheme)?|pyramid scheme|chargeback fraud|"
    r"identity theft|insurance fraud|tax evasion|carding)\b|"
    r"\bscam(?:ming)?\s+(?:people|someone|somebody|victims|users|customers|the elderly|old "
    r"people|others|my|his|her|their|tourists|foreigners|orang)\b|\bdefraud\w*|"
    r"\b(?:create|make|build|send|set up|design|write|generate|draft|compose|craft|prepare)\s+"
    r"(?:a |an |some )?(?:\w+ )?(?:phishing|fake|spoofed|scam|forged|fraudulent)\s+(?:\w+\s+)?(?:site|website|page|link|"
    r"email|e-mail|sms|message|app|receipt|transfer slip|payment slip|screenshot|invoice|bank "
    r"statement|ic|id|identity|document|account|qr(?: code)?|call)s?\b|"
    r"\b(?:bypass|evade|evading|get around|getting around|circumvent|trick|fool|cheat|defeat|"
    r"fake|spoof|elak|langkau|pintas)\s+(?:the |a |an |my |your |their )?(?:\w+\s+)?"
    + _KYC
    + r"\b|"
    r"\b(?:use|using|open|opening|register|registering|create|verify|sign up)\s+(?:\S+\s+){0,3}?"
    r"(?:with |using |under )?(?:a |an )?(?:fake|forged|stolen|someone else'?s|somebody else'?s|"
    r"another person'?s|other people'?s|borrowed|bought|rented)\s+(?:\w+\s+)?(?:ic|mykad|"
    r"identity|id|passport|card|credit card|account|documents?|name|selfie|face|phone number)\b|"
    r"\b(?:buy|buying|sell|selling|rent|renting|get|obtain|use)\s+(?:\S+\s+){0,2}?(?:stolen "
    r"(?:cards?|credit cards?|card details|accounts?|identities|data|credentials)|card dumps|"
    r"fullz|cvvs|mule accounts?|money mules?|akaun keldai)\b|\b(?:become|recruit\w*|act as|be)\s+"
    r"(?:a )?(?:money )?mules?\b|\b(?:counterfeit|forge|forging|fake|faking)\s+(?:\w+\s+)?"
    r"(?:money|cash|notes|currency|documents?|signatures?|receipts?|ic|mykad|passport|"
    r"transfer slips?|bank statements?|payslips?)\b|\bcash ?out (?:\S+\s+){0,3}?(?:stolen|hacked|fraudulent|"
    r"someone else'?s)\b|\bmoney mules?\b|"
    r"\b(?:transfer|move|withdraw|take|get|steal|siphon|drain)\s+(?:\S+\s+){0,3}?(?:money|funds|"
    r"balance|cash|duit|wang)\s+(?:\S+\s+){0,3}?(?:from|out of)\s+" + THIRD_PARTY_POSSESSIVE + r"|"
    r"\bwithout (?:getting |being )?(?:caught|detected|traced|noticed|tracked|flagged|found out)\b|"
    r"\bwithout (?:the |any |my )?(?:bank|banks|authorities|police|government|bnm|lhdn|irs|tax "
    r"office|anyone|them|it being)\s+(?:\S+\s+)?(?:reporting|noticing|knowing|finding out|"
    r"detecting|tracing|flagging|tracking|seeing|reported|flagged|traced)\b|"
    r"\b(?:structure|structuring|split|splitting) (?:\S+\s+)?(?:deposits|transfers|payments|"
    r"transactions) (?:to avoid|so (?:that )?(?:it|they|the bank)|under the)\b|\bsmurfing\b|"
    r"\b(?:empty|emptying|drain|draining|clean out|cleaning out|wipe out|siphon|siphoning)\s+"
    r"(?:out\s+)?" + THIRD_PARTY_POSSESSIVE + r"\s+(?:\S+\s+)?(?:e-?wallet|wallet|account|balance|"
    r"card|savings|bank)\b|"
    r"\b(?:fake|forged|fraudulent|counterfeit|doctored|edited|photoshopped|palsu)\s+(?:\w+\s+){0,2}"
    r"(?:receipts?|transfer slips?|payment slips?|screenshots?|proof of (?:payment|transfer)|"
    r"invoices?|bank statements?|payslips?|ic|mykad|documents?|resit)\b|"
    r"\b(?:resit|slip|bukti (?:pembayaran|pindahan|bayaran)|dokumen|ic|mykad|penyata)\s+(?:\S+\s+)?"
    r"palsu\b|"
    r"\b(?:abuse|abusing|exploit|exploiting|cheat|cheating|farm|farming|game|gaming)\s+(?:the\s+)?"
    r"(?:\S+\s+)?(?:cashback|promo|promotion|promos|referral|rewards?|vouchers?|bonus|points|"
    r"loophole|glitch|bug)s?\b|\b(?:create|open|register|make)\s+(?:fake|duplicate|dummy|burner|"
    r"dozens of|hundreds of)\s+(?:\S+\s+)?accounts\b|"
    r"\b(?:use|using|open|opening|register|registering|verify|sign up)\s+(?:\S+\s+){0,3}?"
    r"(?:with |using |under )?" + THIRD_PARTY_POSSESSIVE + r"\s+(?:\w+\s+)?(?:ic|mykad|identity|"
    r"id|passport|selfie|face|name|documents?)\b|"
    r"\b(?:evade|evading|avoid paying|dodge|dodging) tax(?:es)?\b|"
    # Evasion as the purpose: "... so nobody reports it", "supaya tidak dilaporkan".
    r"\bso (?:that )?(?:nobody|no one|no-one|the (?:bank|authorities|police|government|regulator)|"
    r"they) (?:will |would |won'?t |doesn'?t |don'?t |can'?t |cannot |never )?(?:report|notice|"
    r"find out|detect|trace|flag|track)s?\b|\b(?:supaya|agar) (?:tidak|tak) (?:dilaporkan|"
    r"dikesan|dijejak|diketahui|disedari)\b|"
    r"\b(?:guna|gunakan|pakai|menggunakan)\s+(?:\S+\s+)?(?:ic|mykad|kad pengenalan|pasport|"
    r"gambar|foto|selfie|identiti|muka)\s+(?:orang lain|(?:isteri|suami|kawan|jiran|abang|kakak|"
    r"adik|ibu|ayah|anak|pekerja|orang gaji)\s+(?:saya|aku))\b|"
    r"\b(?:tipu|pintas|elak|mengelak|akali)\s+(?:\S+\s+)?(?:ekyc|e-kyc|kyc|pengesahan|semakan)\b|\btax evasion\b|\binsider "
    r"trading\b|\bpump and dump\b|\b(?:spike|drug) (?:someone|somebody|her|his|a) ?(?:drink)?\b",
    _F,
)
# Imperative requests to produce fraud material ("Draft a phishing email ...", "Write an SMS
# pretending to be the bank"): the request is the intent, so no intent frame is needed; the
# verb must open a clause or follow a request word, so "scammers make fake receipts" passes.
_DRAFT_START = (
    r"(?:^|[.!?\n,;:]\s*|\b(?:please|pls|plz|kindly|can you|could you|would you|will you|"
    r"help me|i want you to|i need you to|now|then|just)\s+)"
)
FRAUD_DRAFT = re.compile(
    _DRAFT_START
    + r"(?:write|draft|compose|create|make|design|craft|generate|prepare|build|set up)\s+"
    r"(?:me\s+|us\s+)?(?:a |an |some |the )?(?:\w+ ){0,2}?(?:(?:phishing|fake|spoofed|scam|"
    r"forged|fraudulent|counterfeit)\s+(?:\w+\s+)?(?:site|website|page|link|email|e-mail|sms|"
    r"message|text|app|receipt|transfer slip|payment slip|screenshot|invoice|bank statement|ic|id|"
    r"document|account|qr(?: code)?|call|script|scheme|investment|offer|giveaway)|(?:sms|text|"
    r"message|email|e-mail|letter|notice|script|website|page|call script)(?:es|s)?\b(?:\s+\S+){0,3}?"
    r"\s+(?:pretending to be|claiming to be|posing as|impersonating|that looks like|looking like|"
    r"as if (?:it'?s|it is|it was) from|disguised as))|"
    + _DRAFT_START
    + r"(?:tulis|tuliskan|buat|buatkan|hasilkan|cipta|karang|reka|sediakan)\s+(?:\S+\s+)?"
    r"(?:mesej|sms|emel|e-mel|surat|laman web|notis|skrip|resit)\s+(?:\S+\s+){0,2}?(?:palsu|"
    r"kononnya|menyamar)\b",
    _F,
)
CRIME = re.compile(
    r"\b(?:commit|committing|carry out|carrying out|plan|planning|get away with|getting away with|"
    r"engage in|engaging in|organi[sz]e|set up|start|fund|finance|replicate|repeat|recreate|"
    r"stage|execute|executing)\s+(?:a |an |the |another |some )?(?:\w+ )?(?:murder|homicide|"
    r"massacres?|genocide|explosion|bomb attack|"
    r"terror(?:ist)? attacks?|terrorism|bombing|shooting|robbery|armed robbery|burglary|heist|"
    r"kidnapping|abduction|arson|assault|violent assault|rape|treason|human trafficking|"
    r"trafficking(?: operation)?|sex trafficking|crimes?|felony|hate crimes?|assassination|"
    r"mass shooting|school shooting|extortion|blackmail|cyber ?attacks?|ddos(?: attacks?)?|"
    r"ransomware(?: attacks?)?|smuggling|poaching|vandalism|9/11 attacks?|attacks?|ethnic "
    r"cleansing|hijacking)\b|\bhuman trafficking operation\b|\bpedophil\w*|\bpaedophil\w*|"
    r"\bchild (?:porn\w*|sexual abuse material)|\bcsam\b|\b(?:sex|sexual\w*|nude|naked|explicit)\s+"
    r"(?:\S+\s+){0,3}?(?:child|children|minors?|kids?|underage|toddlers?|under-?age)\b",
    _F,
)


@dataclass(frozen=True)
class Family:
    """One kind of harm: its action pattern and how much context it needs."""

    name: str
    pattern: re.Pattern[str]
    needs_intent: bool = True
    fiction_exempt: bool = False


FAMILIES: tuple[Family, ...] = (
    Family("harmful.self_harm", SELF_HARM, needs_intent=False),
    Family("harmful.self_harm", SELF_HARM_EMULATE),
    Family("harmful.violence", VIOLENCE, fiction_exempt=True),
    Family("harmful.violence", PLAN_DEATH, fiction_exempt=True),
    Family("harmful.weapons", WEAPONS, fiction_exempt=True),
    Family("harmful.drugs", DRUGS),
    Family("harmful.hacking", HACKING),
    Family("harmful.fraud", FRAUD),
    Family("harmful.fraud", FRAUD_DRAFT, needs_intent=False),
    Family("harmful.theft", THEFT, fiction_exempt=True),
    Family("harmful.property", PROPERTY, fiction_exempt=True),
    Family("harmful.crime", CRIME, fiction_exempt=True),
)


def _sentence(view: str, start: int, end: int) -> tuple[int, int]:
    left = max((m.end() for m in SENTENCE_END.finditer(view, 0, start)), default=0)
    right_match = SENTENCE_END.search(view, end)
    return left, right_match.start() if right_match else len(view)


def has_intent(view: str, start: int, end: int, sentence_start: int) -> bool:
    """An intent frame earlier in the same sentence, with no victim framing in between."""
    window_start = max(sentence_start, start - _MAX_GAP)
    intents = [m for m in INTENT.finditer(view, window_start, end) if m.start() < start]
    if not intents:
        return False
    # The frame nearest the action decides ("how do I report ... " vs "how do I ...").
    last = intents[-1]
    return not COUNTER.search(view, last.end(), max(start, last.end()))


def harm_core(view: str) -> re.Match[str] | None:
    """A harmful action asked for, ignoring the fiction/game exemption (used by the jailbreak
    rule on hypothetical framing: "for a story, explain how to make a bomb")."""
    for family in FAMILIES:
        for match in family.pattern.finditer(view):
            start, _ = _sentence(view, match.start(), match.end())
            if not family.needs_intent or has_intent(view, match.start(), match.end(), start):
                return match
    return None


def detect_harmful(norm: Normalized) -> GuardFinding | None:
    """HARMFUL_REQUEST when a harmful action is asked for (intent frame + action)."""
    for label, view in norm.word_views():
        for family in FAMILIES:
            for match in family.pattern.finditer(view):
                start, end = _sentence(view, match.start(), match.end())
                if family.needs_intent and not has_intent(view, match.start(), match.end(), start):
                    continue
                if (
                    family.fiction_exempt
                    and FICTION_CONTEXT.search(view, start, end)
                    and not REAL_WORLD.search(view, start, end)
                ):
                    continue
                quoted = excerpt(view, match.start(), match.end())
                return finding(
                    RefusalReason.HARMFUL_REQUEST,
                    family.name,
                    f"matched {quoted!r} in {label}",
                )
    return None


GUARD = input_rule(
    "harmful_request", "HarmfulRequest", detect_harmful, (RefusalReason.HARMFUL_REQUEST,)
)
