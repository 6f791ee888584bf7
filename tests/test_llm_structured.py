"""Choosing, JSON and scoring through `guardrag.core.llm.structured`: against the real bundled
server (slow, needs the model) and against a stub OpenAI endpoint for the remote paths."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrag.core.llm import local as local_llm
from guardrag.core.llm.client import Endpoint
from guardrag.core.llm.structured import (
    EndpointError,
    StructuredLLM,
    Unsupported,
    gbnf_alternatives,
    with_json_instruction,
)
from tests.openai_stub import OpenAIStub
from tests.test_local_llm import installed_settings, settings_for

PASSAGES = (
    "[1] Top-ups by bank transfer arrive within 2 hours.\n"
    "[2] You can freeze your card in the app under Settings > Security.\n"
    "[3] Refunds go back to the original payment method within 5 days.\n"
)
PICK = {
    "type": "object",
    "properties": {"choice": {"type": "string", "enum": ["1", "2", "3", "none"]}},
    "required": ["choice"],
    "additionalProperties": False,
}
WRITER = "You write the question a customer would ask that the given FAQ passage answers."


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# --- the real bundled server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StructuredLLM]:
    settings = installed_settings(tmp_path_factory.mktemp("structured"), llm_timeout_s=300)
    llm = StructuredLLM.from_settings(settings)
    try:
        yield llm
    finally:
        llm.close()
        local_llm.stop_all()


@pytest.mark.slow
def test_choice_is_confined_to_the_options_with_their_probabilities(real: StructuredLLM) -> None:
    # The prompt asks for something else: the grammar holds anyway.
    question = "Which passage answers: how do I freeze my card? Reply with the number 7."
    choice = real.choose(user(PASSAGES + "\n" + question), ["1", "2", "3", "none"])
    assert choice.option in ("1", "2", "3", "none")
    assert math.isclose(sum(choice.probabilities.values()), 1.0)
    assert choice.option == max(choice.probabilities, key=lambda o: choice.probabilities[o])
    assert 0 < choice.mass <= 1.0


@pytest.mark.slow
def test_a_clear_choice_is_confident(real: StructuredLLM) -> None:
    choice = real.choose(user("Is Paris the capital of France? Answer yes or no."), ["yes", "no"])
    assert choice.option == "yes" and choice.probabilities["yes"] > 0.9, choice


@pytest.mark.slow
def test_options_must_differ_in_their_first_token(real: StructuredLLM) -> None:
    with pytest.raises(ValueError, match="start with the same token"):
        real.choose(user("Pick one."), ["card", "card fees"])


@pytest.mark.slow
def test_json_fits_the_schema(real: StructuredLLM) -> None:
    question = "Which passage answers: how do I freeze my card? Reply with the number 7."
    answer = real.json(user(PASSAGES + "\n" + question), PICK, max_tokens=30)
    assert set(answer) == {"choice"} and answer["choice"] in ("1", "2", "3", "none")


@pytest.mark.slow
def test_the_question_a_passage_answers_is_the_likelier_continuation(real: StructuredLLM) -> None:
    """Query likelihood: log P(question | passage) ranks the passage that answers it first."""
    passage = "Passage: To freeze your card, open the app, go to Settings > Security and tap "
    messages = [
        {"role": "system", "content": WRITER},
        {"role": "user", "content": passage + "Freeze card.\n\nQuestion:"},
    ]
    fits = real.continuation(messages, "How do I freeze my card?")
    other = real.continuation(messages, "When will I get my refund?")
    assert "".join(fits.tokens) == "How do I freeze my card?"
    assert all(lp <= 0 for lp in fits.logprobs) and len(fits.logprobs) == len(fits.tokens)
    assert fits.mean > other.mean + 1.0, (fits, other)


# --- a remote OpenAI-compatible endpoint ------------------------------------------------------


@pytest.fixture
def stub() -> Iterator[tuple[OpenAIStub, StructuredLLM]]:
    fake = OpenAIStub()
    with fake.serve() as url, StructuredLLM(Endpoint(url, "sk-test", "gpt-x", local=False)) as llm:
        yield fake, llm


def top(*pairs: tuple[str, float]) -> dict[str, Any]:
    """OpenAI's choice.logprobs for a first token with these alternatives."""
    alternatives = [{"token": token, "logprob": math.log(p)} for token, p in pairs]
    return {"content": [{**alternatives[0], "top_logprobs": alternatives}]}


def test_remote_choice_reads_the_first_tokens_alternatives(
    stub: tuple[OpenAIStub, StructuredLLM],
) -> None:
    fake, llm = stub
    fake.replies = ["2"]
    fake.logprobs = top(("2", 0.6), (" 3", 0.2), ("The", 0.15), ("n", 0.05))
    choice = llm.choose(user("Which one? Reply 1, 2, 3 or none."), ["1", "2", "3", "none"])
    assert choice.option == "2" and math.isclose(choice.mass, 0.85)
    assert math.isclose(choice.probabilities["2"], 0.6 / 0.85)
    assert math.isclose(choice.probabilities["none"], 0.05 / 0.85)  # "n" begins only "none"
    assert choice.probabilities["1"] == 0.0
    request = fake.requests[-1]
    assert request["logprobs"] is True and request["top_logprobs"] == 20
    assert "grammar" not in request and request["model"] == "gpt-x"


def test_remote_choice_without_logprobs_is_unsupported(
    stub: tuple[OpenAIStub, StructuredLLM],
) -> None:
    fake, llm = stub
    with pytest.raises(Unsupported, match="no logprobs"):
        llm.choose(user("Which one?"), ["1", "2"])
    fake.status, fake.error_message = 400, "logprobs are not supported with this model"
    with pytest.raises(Unsupported, match="logprobs are not supported"):
        llm.choose(user("Which one?"), ["1", "2"])


def test_remote_json_asks_for_json_and_parses_it(stub: tuple[OpenAIStub, StructuredLLM]) -> None:
    fake, llm = stub
    fake.replies = ['{"choice": "2"}', '{"choice": "2"']
    assert llm.json(user("Which one?"), PICK) == {"choice": "2"}
    request = fake.requests[-1]
    assert request["response_format"]["json_schema"]["schema"] == PICK
    assert request["messages"][0] == {"role": "system", "content": "Reply with JSON only."}
    with pytest.raises(EndpointError, match="not JSON"):
        llm.json(user("Which one?"), PICK)
    fake.replies, fake.finish_reason = ['{"choice": "2"}   '], "length"
    with pytest.raises(EndpointError, match="token cap"):
        llm.json(user("Which one?"), PICK)


def test_remote_endpoints_cannot_score_given_text(stub: tuple[OpenAIStub, StructuredLLM]) -> None:
    _, llm = stub
    with pytest.raises(Unsupported, match=r"only the bundled llama\.cpp server"):
        llm.continuation(user("Passage: ..."), "How do I freeze my card?")


def test_a_dead_endpoint_is_an_endpoint_error(tmp_path: Path) -> None:
    dead = Endpoint("http://127.0.0.1:9/v1", "k", "m", local=False)
    with StructuredLLM(dead) as llm, pytest.raises(EndpointError, match=r"127\.0\.0\.1:9"):
        llm.json(user("x"), PICK)


def test_no_model_at_all_says_why(tmp_path: Path) -> None:
    with pytest.raises(EndpointError, match="not installed"):
        StructuredLLM.from_settings(settings_for(tmp_path))


def test_grammar_and_instruction_helpers() -> None:
    assert gbnf_alternatives(["1", 'say "hi"']) == 'root ::= "1" | "say \\"hi\\""'
    system = [{"role": "system", "content": "Be brief."}, *user("x")]
    assert with_json_instruction(system)[0]["content"] == "Be brief.\nReply with JSON only."
    assert with_json_instruction(with_json_instruction(system)) == with_json_instruction(system)
