"""Keep guardrails-ai offline: no metrics, no remote inference, no OpenTelemetry export.

Why in code and not only in ~/.guardrailsrc: `Guard()` re-reads that file on every
construction and, when it is absent, defaults to `enable_metrics=True`. Its Hub tracer then
queues spans for an HTTPS endpoint, and offline every process stalls ~20-30 s at exit while
the exporter retries. So we (1) disable the OpenTelemetry SDK before any tracer provider is
built, (2) pin the two rc switches off, (3) make `RC.load` keep them off whatever the rc
file says, and (4) turn guardrails' own tracing off. Run by `framework`, the one module
that imports guardrails.

It also defers the guardrails API client (see `_defer_api_client`): every `Guard()` builds
one for its server mode, two httpx clients each loading the CA bundle (~0.04 CPU-s), and we
never use the server.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

_configured = False


def configure_guardrails_offline() -> None:
    """Idempotent. Must run before the first `Guard()` or `Validator()` is built."""
    global _configured
    if _configured:
        return
    # Read by opentelemetry-sdk when a TracerProvider is created: spans become no-ops.
    os.environ["OTEL_SDK_DISABLED"] = "true"
    # Sequential validator service: validators run in our order and stop at the first
    # failure (the async service runs them all, and warns when called inside an event loop).
    os.environ.setdefault("GUARDRAILS_RUN_SYNC", "true")
    # guardrails imports jsonschema, which compiles the 38 Lark grammars of the optional
    # rfc3987-syntax package at import when it is installed (another tool's extra): ~1 CPU-s
    # in every process, for an "iri" format check no guard of ours uses. Seen as absent.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

    from guardrails.classes import rc as rc_module
    from guardrails.settings import settings

    original_load = rc_module.RC.load.__func__

    def load_offline(cls: type[Any], logger: Any = None) -> Any:
        rc = original_load(cls, logger)
        rc.enable_metrics = False
        rc.use_remote_inferencing = False
        return rc

    rc_module.RC.load = classmethod(load_offline)
    settings.rc = rc_module.RC.load()
    # No spans at all: with the SDK off they go nowhere, yet each validator call still
    # serialised its inputs, settings and result into span attributes (~0.5 ms a question).
    settings.disable_tracing = True

    from guardrails import api_client, guard

    _defer_api_client(guard, api_client)
    _configured = True


#: What a deferred client builds on first use; anything else is looked up as usual.
_CLIENT_ATTRIBUTES = frozenset({"ahttp_client", "http_client", "timeout", "base_url", "api_key"})


def _defer_api_client(guard_module: Any, api_client_module: Any) -> bool:
    """Make `Guard()` build its API client on first use instead of at construction.

    Written against guardrails-ai 0.11.0, where `Guard.__init__` always calls
    `GuardrailsApiClient(api_key=..., base_url=...)` (no setting, env variable or argument
    skips it; `use_server` is read after) and the client's `__init__` only stores its
    settings and builds the two httpx clients. The subclass installed here keeps every
    method and `isinstance`, and builds the real thing the first time a method reads one of
    `_CLIENT_ATTRIBUTES`, so server mode and `Guard.save()` work unchanged (the one change:
    `GUARDRAILS_BASE_URL`/`_API_KEY` are read at first use). When guardrails
    no longer looks like that, nothing is patched: construction stays eager, as it was.
    Returns whether the deferral is installed.
    """
    real = getattr(api_client_module, "GuardrailsApiClient", None)
    if getattr(guard_module, "GuardrailsApiClient", None) is not real or not isinstance(real, type):
        return False  # already deferred, or guardrails changed: leave it alone
    real_init = vars(real).get("__init__")
    try:
        parameters = list(inspect.signature(real_init).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    if parameters != ["self", "base_url", "api_key"]:
        return False

    class DeferredGuardrailsApiClient(real):  # type: ignore[misc, valid-type]
        """A `GuardrailsApiClient` that opens its httpx clients on first use."""

        def __init__(self, base_url: str | None = None, api_key: str | None = None) -> None:
            self.__dict__["_deferred_arguments"] = (base_url, api_key)

        def __getattr__(self, name: str) -> Any:
            # Only reached for attributes not set yet; copy/pickle probes fall through.
            if name not in _CLIENT_ATTRIBUTES or "_deferred_arguments" not in self.__dict__:
                raise AttributeError(name)
            real_init(self, *self.__dict__.pop("_deferred_arguments"))  # type: ignore[misc]
            return getattr(self, name)

    guard_module.GuardrailsApiClient = DeferredGuardrailsApiClient
    return True


def guardrails_is_offline() -> bool:
    """What the tests assert: every switch that could phone home is off."""
    from guardrails.classes.rc import RC
    from guardrails.settings import settings

    return (
        os.environ.get("OTEL_SDK_DISABLED") == "true"
        and settings.rc.enable_metrics is False
        and settings.rc.use_remote_inferencing is False
        and RC.load().enable_metrics is False
        and not settings.use_server
    )
