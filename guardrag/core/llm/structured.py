"""Making the model choose and score instead of write: constrained choices with probabilities,
JSON-schema output, and the log-probability of a given continuation.

    llm = StructuredLLM.from_settings(settings)
    pick = llm.choose(messages, ["1", "2", "3", "none"])  # Choice("2", {"1": .21, "2": .42, ...})
    data = llm.json(messages, schema)                      # a dict that fits the schema
    fit = llm.continuation(messages, "How do I freeze my card?")  # Continuation(logprobs=[...])

`choose` and `json` work against the bundled llama.cpp server and any OpenAI-compatible
endpoint that supports `logprobs`/`top_logprobs` and `response_format` json_schema;
`continuation` needs the bundled server's native routes. An endpoint that cannot do what is
asked raises `Unsupported`; a failed or malformed call raises `EndpointError`.

Two facts about llama.cpp shape this module. Its reported log-probabilities are the model's
raw distribution, taken before the grammar, so `choose` asks for the top tokens and
renormalises over the allowed options itself. And it has no prompt-logprob route (`echo` is
ignored), so `continuation` forces the continuation's exact token ids with a grammar and reads
each forced token's raw log-probability.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from guardrag.config.settings import Settings
from guardrag.contract import GuardragError
from guardrag.core.llm.client import Endpoint, endpoint, timeout_s, unavailable_reason

Messages = Sequence[Mapping[str, str]]
#: Without it the JSON grammar (which allows whitespace after the closing brace) lets a small
#: model pad with spaces up to the token cap: finish_reason "length" on a complete object.
JSON_INSTRUCTION = "Reply with JSON only."


class StructuredError(GuardragError):
    """A structured call could not be made; the message says why."""


class Unsupported(StructuredError):
    """The endpoint cannot do what was asked (no logprobs, no json_schema, no native routes)."""


class EndpointError(StructuredError):
    """The endpoint failed (connection, HTTP error) or answered something unusable."""


@dataclass(frozen=True)
class Choice:
    """The option the model picked and how likely it found each one.

    `probabilities` are renormalised over the options (they sum to 1); `mass` is how much of
    the model's raw next-token probability the options had together: low means the model
    wanted to say something else and the choice is a weak signal.
    """

    option: str
    probabilities: dict[str, float]
    mass: float


@dataclass(frozen=True)
class Continuation:
    """log P(token_i | prompt, tokens before it), one per token of the continuation."""

    tokens: list[str]
    logprobs: list[float]

    @property
    def total(self) -> float:
        return sum(self.logprobs)

    @property
    def mean(self) -> float:
        return self.total / len(self.logprobs)


def gbnf_alternatives(options: Sequence[str]) -> str:
    """A GBNF grammar whose only sentences are `options`."""
    return "root ::= " + " | ".join(json.dumps(option, ensure_ascii=False) for option in options)


def with_json_instruction(messages: Messages) -> list[dict[str, str]]:
    """The messages with JSON_INSTRUCTION in their system message (added when there is none)."""
    out = [dict(message) for message in messages]
    if out and out[0].get("role") == "system":
        if JSON_INSTRUCTION not in out[0]["content"]:
            out[0]["content"] = f"{out[0]['content']}\n{JSON_INSTRUCTION}"
        return out
    return [{"role": "system", "content": JSON_INSTRUCTION}, *out]


class StructuredLLM:
    """Choice, JSON and scoring calls to one endpoint; thread-safe, reuses its connections."""

    def __init__(self, target: Endpoint, *, timeout_s: float = 60.0) -> None:
        self.endpoint = target
        self._http = httpx.Client(
            base_url=target.root_url,
            headers={"Authorization": f"Bearer {target.api_key}"},
            timeout=timeout_s,
            trust_env=not target.local,  # loopback never goes through a proxy
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> StructuredLLM:
        """The configured endpoint, or the bundled model's server (started if need be)."""
        target = endpoint(settings)
        if target is None:
            raise EndpointError(unavailable_reason(settings) or "no language model configured")
        return cls(target, timeout_s=timeout_s(settings, target.local))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> StructuredLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- calls ---------------------------------------------------------------------------------

    def choose(self, messages: Messages, options: Sequence[str], *, top: int = 20) -> Choice:
        """Which of `options` the model answers, with its probabilities over them.

        On the bundled server a grammar confines the answer to the options, which must start
        with different tokens (one request). Elsewhere the model answers freely and the options
        are read off the first token's `top` alternatives (at most 20 at OpenAI), so the
        messages should ask for exactly one of the options.
        """
        if len(set(options)) < 2:
            raise ValueError(f"choose needs at least two different options, got {options!r}")
        body: dict[str, Any] = {
            "messages": list(messages),
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": top,
            "max_completion_tokens": 16,
        }
        first_ids: dict[int, str] = {}
        if self.endpoint.local:
            first_ids = self._first_tokens(options)
            body["grammar"] = gbnf_alternatives(options)
        reply = self._chat(body)
        try:
            alternatives = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise Unsupported(f"{self.endpoint.base_url} returned no logprobs") from None
        raw: dict[str, float] = {}
        for alternative in alternatives:
            option = (
                first_ids.get(alternative.get("id", -1))
                if first_ids
                else _option_of(alternative["token"], options)
            )
            if option is not None:
                raw[option] = raw.get(option, 0.0) + math.exp(alternative["logprob"])
        mass = sum(raw.values())
        if mass <= 0:
            raise EndpointError(
                f"none of the options {list(options)} is among the model's top {top} tokens"
            )
        probabilities = {option: raw.get(option, 0.0) / mass for option in options}
        text = (reply["choices"][0]["message"].get("content") or "").strip()
        if text not in probabilities:  # a free answer that is not an option: the likeliest
            text = max(probabilities, key=lambda option: probabilities[option])
        return Choice(text, probabilities, mass)

    def json(self, messages: Messages, schema: Mapping[str, Any], *, max_tokens: int = 256) -> Any:
        """The model's answer as JSON that fits `schema` (enforced by the endpoint).

        The messages get JSON_INSTRUCTION in their system message.
        """
        reply = self._chat(
            {
                "messages": with_json_instruction(messages),
                "temperature": 0,
                "max_completion_tokens": max_tokens,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "strict": True, "schema": dict(schema)},
                },
            }
        )
        choice = reply["choices"][0]
        content = choice["message"].get("content") or ""
        if choice.get("finish_reason") == "length":
            raise EndpointError(f"the JSON answer hit the {max_tokens}-token cap: {content!r}")
        try:
            return json.loads(content)
        except ValueError:
            raise EndpointError(f"the answer is not JSON: {content!r}") from None

    def continuation(self, messages: Messages, text: str) -> Continuation:
        """How likely the model finds `text` as its answer to `messages`, token by token.

        The prompt is the messages in the model's chat template, up to the assistant's turn;
        `text` is cut into the tokens the model's tokenizer gives it (its canonical form),
        and each is forced in turn with a grammar. Bundled server only.
        """
        if not self.endpoint.local:
            raise Unsupported(
                f"{self.endpoint.base_url} has no native routes to score given text; "
                "only the bundled llama.cpp server does"
            )
        ids = self._tokenize(text)
        if not ids:
            raise ValueError("cannot score an empty continuation")
        prompt = self._post("/apply-template", {"messages": list(messages)})["prompt"]
        reply = self._post(
            "/completion",
            {
                "prompt": prompt,
                "grammar": "root ::= " + " ".join(f"<[{i}]>" for i in ids),
                "n_predict": len(ids),
                "n_probs": 1,
                "post_sampling_probs": False,  # the raw log-softmax, not the forced 1.0
                "temperature": 0,
                "cache_prompt": True,
            },
        )
        steps = reply.get("completion_probabilities") or []
        if [step.get("id") for step in steps] != ids:
            raise EndpointError(
                f"forced tokens {ids}, the server decoded {[s.get('id') for s in steps]}"
            )
        return Continuation([s["token"] for s in steps], [s["logprob"] for s in steps])

    # --- plumbing ------------------------------------------------------------------------------

    def _first_tokens(self, options: Sequence[str]) -> dict[int, str]:
        firsts: dict[int, str] = {}
        for option in options:
            ids = self._tokenize(option)
            if not ids:
                raise ValueError("an option is empty")
            if ids[0] in firsts:
                raise ValueError(
                    f"options {firsts[ids[0]]!r} and {option!r} start with the same token; "
                    "choose tells options apart by their first token"
                )
            firsts[ids[0]] = option
        return firsts

    def _tokenize(self, text: str) -> list[int]:
        tokens = self._post("/tokenize", {"content": text, "add_special": False})["tokens"]
        return [t if isinstance(t, int) else t["id"] for t in tokens]

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._post("/v1/chat/completions", {"model": self.endpoint.model, **body})

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._http.post(self._path(path), json=body)
        except httpx.HTTPError as exc:
            raise EndpointError(f"{self.endpoint.root_url}{path}: {exc!r}") from None
        if response.status_code >= 400:
            message = response.text[:300]
            unsupported = response.status_code in (400, 404, 422, 501) and any(
                word in message for word in ("logprobs", "response_format", "json_schema")
            )
            error = Unsupported if unsupported else EndpointError
            raise error(f"{path} answered {response.status_code}: {message}")
        try:
            reply: dict[str, Any] = response.json()
        except ValueError:
            raise EndpointError(f"{path} answered something that is not JSON") from None
        return reply

    def _path(self, path: str) -> str:
        """A remote base URL may have a path of its own before /v1 (…/openai/v1)."""
        if path.startswith("/v1/"):
            return self.endpoint.base_url.removesuffix("/") + path.removeprefix("/v1")
        return path


def _option_of(token: str, options: Sequence[str]) -> str | None:
    """The one option a top token can begin (None when it begins none, or several)."""
    piece = token.strip()
    matches = [option for option in options if piece and option.startswith(piece)]
    return matches[0] if len(matches) == 1 else None
