"""A guard is one unit: the registry, the public reasons and the generated validators agree.

The contract lists every refusal reason (a public API); these tests hold the guards to it:
every reason a guard refuses with is in the contract with a kind and a message, every
"blocked" reason of the contract has a guard, and no guard module is left out of the list.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest

from guardrag.config.messages import REFUSAL_MESSAGES
from guardrag.contract import REASON_KIND, RefusalReason
from guardrag.core.guards import input as input_guards
from guardrag.core.guards import output as output_guards
from guardrag.core.guards import registry
from guardrag.core.guards.input import shape
from guardrag.core.guards.shared.normalize import normalize
from guardrag.core.guards.unit import Call, GuardUnit

REDTEAM = Path(__file__).resolve().parents[1] / "datasets" / "redteam"


def test_every_guard_reason_is_public_with_a_kind_and_a_message() -> None:
    for unit in registry.units():
        assert unit.reasons, unit.name
        for reason in unit.reasons:
            assert isinstance(reason, RefusalReason)
            assert unit.kinds[reason] in ("blocked", "policy"), (unit.name, reason)
            assert REFUSAL_MESSAGES[reason] == unit.messages[reason]


def test_every_blocked_reason_has_a_guard_and_no_guard_refuses_otherwise() -> None:
    guarded = {reason for unit in registry.units() for reason in unit.reasons}
    guarded |= set(shape.REASONS)
    blocked = {reason for reason, kind in REASON_KIND.items() if kind in ("blocked", "policy")}
    assert guarded == blocked
    assert set(REASON_KIND) == set(RefusalReason)


def test_every_guard_module_is_registered() -> None:
    """A module of guards/input/ or guards/output/ with a `GUARD` is in `registry.GUARDS`."""
    found = []
    for package in (input_guards, output_guards):
        stage = package.__name__.rsplit(".", 1)[1]
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            if isinstance(getattr(module, "GUARD", None), GuardUnit):
                assert module.GUARD.stage == stage, info.name
                found.append(f"{stage}.{info.name}")
    assert sorted(found) == sorted(registry.GUARDS)


def test_names_are_unique_rules_run_before_models_and_attack_rules_first() -> None:
    """The rules before the guards that embed, and among the rules the attack rules before
    the policy rules (a message with an e-mail *and* an attack a rule names is the attack)."""
    units = registry.units()
    assert len({u.name for u in units}) == len(units)
    assert len({u.validator for u in units}) == len(units)
    order = [
        (u.cost == "model", set(u.kinds.values()) != {"blocked"}) for u in registry.at("input")
    ]
    assert order == sorted(order)
    assert {"blocked"} <= {kind for u in registry.at("input") for kind in u.kinds.values()}
    assert all(u.cost == "rule" for u in registry.at("output"))


def in_order(names: list[str], expected: list[str]) -> list[str]:
    """`names` restricted to `expected`: a new guard anywhere leaves the rest in order."""
    return [name for name in names if name in expected]


def test_order_of_checks() -> None:
    """The order decides the reason when several guards fire: it changes only on purpose."""
    expected_input = [
        "Jailbreak",
        "PromptInjection",
        "Credentials",
        "PrivacyRequest",  # a lookup by someone's e-mail is the lookup, not the e-mail
        "HarmfulRequest",
        "PaymentData",  # policy, not attacks: after every attack rule
        "SharedSecret",
        "PersonalData",
        "Profanity",
        "SemanticIntent",  # the guards that embed: last
        "LearnedIntent",
    ]
    expected_output = ["OutputMarkup", "OutputUnsourcedData", "OutputPromptLeak", "OutputProfanity"]
    inputs = [u.validator for u in registry.at("input")]
    outputs = [u.validator for u in registry.at("output")]
    assert in_order(inputs, expected_input) == expected_input
    assert in_order(outputs, expected_output) == expected_output
    redactable = [u.name for u in registry.at("input") if u.redactable]
    assert in_order(redactable, ["payment_data", "personal_data"]) == [
        "payment_data",
        "personal_data",
    ]


def test_generated_validators_keep_their_registered_names() -> None:
    pytest.importorskip("guardrails")
    from guardrag.core.guards import validators

    for unit in registry.units():
        cls = getattr(validators, unit.validator)
        assert cls.rail_alias == f"guardrag/{unit.name}"
        assert cls.__name__ == unit.validator


def test_rule_guards_refuse_only_with_their_declared_reasons() -> None:
    texts = [
        json.loads(line)["text"]
        for name in ("attacks.jsonl", "benign.jsonl")
        for line in (REDTEAM / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    fired = set()
    for text in texts:
        call = Call(text, sources=[], prompts=[])
        norm = normalize(text)
        for unit in registry.units():
            if unit.cost != "rule":
                continue
            found = unit.check(call)
            if found is not None:
                assert found.reason in unit.reasons, (unit.name, found)
                fired.add(unit.name)
        assert call.norm == norm
    assert {"jailbreak", "prompt_injection", "harmful_request"} <= fired
