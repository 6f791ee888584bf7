"""Keep guardrails-ai offline: no metrics, no remote inference, no OpenTelemetry export.

Why in code and not only in ~/.guardrailsrc: `Guard()` re-reads that file on every
construction and, when it is absent, defaults to `enable_metrics=True`. Its Hub tracer then
queues spans for an HTTPS endpoint, and offline every process stalls ~20-30 s at exit while
the exporter retries. So we (1) disable the OpenTelemetry SDK before any tracer provider is
built, (2) pin the two rc switches off, and (3) make `RC.load` keep them off whatever the rc
file says. Imported first by `guardrag.core.guards`.
"""

from __future__ import annotations

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
    _configured = True


def guardrails_is_offline() -> bool:
    """What the tests assert: every switch that could phone home is off."""
    from guardrails.classes.rc import RC
    from guardrails.settings import settings

    return (
        os.environ.get("OTEL_SDK_DISABLED") == "true"
        and settings.rc.enable_metrics is False
        and settings.rc.use_remote_inferencing is False
        and RC.load().enable_metrics is False
    )
