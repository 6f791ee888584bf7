"""The one list of guards: `InputGuard`, `OutputGuard` and the guardrails-ai validators are
built from it.

Each entry names a module of `guards/` that defines `GUARD` (a `unit.GuardUnit`). Input
guards run in this order after the shape check (empty / too long), and the first that refuses
decides the reason. The attack rules first: jailbreak before injection (its markers are the
more specific, and a jailbreak usually also carries injection phrasing); a lookup of someone's
account by their e-mail is `privacy`'s attack. Then the policy rules (card numbers, one-time
codes, personal data, profanity: refused, but not an attack), so a message that carries an
e-mail or a card number *and* an attack a rule names is reported as the attack. The model
guards last (the only ones that embed): a message a policy rule already explains is not
left to the classifier's guess ("Your support is absolute bullshit." is profanity, not the
injection the classifier would call it). Output guards run in their order on every answer.
"""

from __future__ import annotations

import importlib
from functools import cache

from guardrag.core.guards.unit import GuardUnit, Stage

GUARDS: tuple[str, ...] = (
    "input.jailbreak",
    "input.injection",
    "input.credentials",
    "input.privacy",
    "input.harmful",
    "input.payment_data",
    "input.shared_secret",
    "input.personal_data",
    "input.profanity",
    "input.semantic",
    "input.learned_injection",
    "output.markup",
    "output.unsourced_data",
    "output.prompt_leak",
    "output.profanity",
)


@cache
def units() -> tuple[GuardUnit, ...]:
    """Every registered guard, in `GUARDS` order (each module imported once)."""
    found = []
    for name in GUARDS:
        unit = importlib.import_module(f"{__package__}.{name}").GUARD
        if not isinstance(unit, GuardUnit):
            raise TypeError(f"{name}.GUARD is not a GuardUnit")
        found.append(unit)
    return tuple(found)


def at(stage: Stage) -> tuple[GuardUnit, ...]:
    """The guards that run at `stage`, in order."""
    return tuple(unit for unit in units() if unit.stage == stage)
