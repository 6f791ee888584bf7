"""guardrails-ai set up by `guardrag.core.guards.telemetry`: offline, and no API client built
until server mode actually uses one (each costs two httpx clients, ~0.04 CPU-s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace
from typing import Any, ClassVar

import httpx
import pytest
from guardrails import Guard
from guardrails.api_client import GuardrailsApiClient

from guardrag.core.guards import InputGuard, OutputGuard
from guardrag.core.guards.telemetry import _defer_api_client, guardrails_is_offline
from tests.openai_stub import loopback


@pytest.fixture
def httpx_clients_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the httpx clients constructed while the test runs."""
    built: list[str] = []
    for cls in (httpx.Client, httpx.AsyncClient):
        original = cls.__init__

        def spy(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            built.append(type(self).__name__)
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", spy)
    return built


def test_guards_build_no_http_client(httpx_clients_built: list[str]) -> None:
    InputGuard(semantic=False)
    OutputGuard()
    guard = Guard(name="plain")
    assert httpx_clients_built == []
    assert isinstance(guard._api_client, GuardrailsApiClient)
    assert guardrails_is_offline()


def test_deferred_client_builds_on_first_use(httpx_clients_built: list[str]) -> None:
    client = Guard(base_url="http://127.0.0.1:9", api_key="k")._api_client
    assert client is not None
    assert client.base_url == "http://127.0.0.1:9" and client.api_key == "k"
    assert sorted(httpx_clients_built) == ["AsyncClient", "Client"]
    assert isinstance(client.http_client, httpx.Client)
    assert len(httpx_clients_built) == 2  # built once


class _GuardsApi(BaseHTTPRequestHandler):
    """Answers `GET /guards?name=...` like a guardrails-api server with one guard."""

    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("x-guardrailsai-api-key")))
        body = json.dumps([{"id": "g-1", "name": "remote"}]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def guards_api() -> Iterator[str]:
    with loopback(_GuardsApi) as url:
        yield url


def test_server_mode_still_reaches_the_server(guards_api: str) -> None:
    """Server mode is untouched: `Guard.load` fetches over real HTTP with the given key."""
    _GuardsApi.seen.clear()
    loaded = Guard.load("remote", base_url=guards_api, api_key="secret-key")
    assert loaded is not None and loaded.id == "g-1" and loaded._use_server is True
    assert _GuardsApi.seen == [("/guards?name=remote", "secret-key")]


def test_a_changed_guardrails_is_left_eager() -> None:
    """When the internals are not the ones the deferral was written for, nothing is patched."""

    class OtherClient:
        def __init__(self, base_url: str | None = None, *, timeout: float = 1.0) -> None:
            pass

    guard_module = SimpleNamespace(GuardrailsApiClient=OtherClient)
    assert (
        _defer_api_client(guard_module, SimpleNamespace(GuardrailsApiClient=OtherClient)) is False
    )
    assert guard_module.GuardrailsApiClient is OtherClient
    # Guard no longer importing the client by that name, or a client that is not a class.
    assert (
        _defer_api_client(SimpleNamespace(), SimpleNamespace(GuardrailsApiClient=OtherClient))
        is False
    )
    assert (
        _defer_api_client(
            SimpleNamespace(GuardrailsApiClient=len), SimpleNamespace(GuardrailsApiClient=len)
        )
        is False
    )


def test_deferral_installs_once() -> None:
    import guardrails.api_client
    import guardrails.guard

    assert guardrails.guard.GuardrailsApiClient is not GuardrailsApiClient  # installed
    assert _defer_api_client(guardrails.guard, guardrails.api_client) is False


def test_guard_checks_write_no_trace_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """guardrails' own tracing is off: with the OpenTelemetry SDK disabled its spans went
    nowhere, yet every validator call serialised its inputs and result into them."""
    from guardrails.settings import settings
    from guardrails.telemetry import validator_tracing

    spans: list[str] = []
    monkeypatch.setattr(
        validator_tracing, "add_validator_attributes", lambda *a, **k: spans.append("span")
    )
    guard, answer = OutputGuard(), "Top up in the app with FPX or a debit card."
    assert guard.check(answer, [answer], []) is None  # every validator ran
    assert spans == []
    monkeypatch.setattr(settings, "disable_tracing", None)  # guardrails' default
    guard.check(answer, [answer], [])
    assert spans  # the spy does see them when tracing is on
