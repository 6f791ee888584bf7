"""Input and output guards: typed refusals before retrieval and before the answer is shown,
and `scan_passage` for instructions hidden in knowledge-base text (indirect injection).

`telemetry` is imported first so guardrails-ai never phones home (see its docstring).
"""

from guardrag.core.guards.telemetry import configure_guardrails_offline

configure_guardrails_offline()

from guardrag.core.guards.finding import GuardFinding  # noqa: E402
from guardrag.core.guards.input_guard import InputGuard  # noqa: E402
from guardrag.core.guards.output_guard import OutputGuard  # noqa: E402
from guardrag.core.guards.passages import scan_passage  # noqa: E402

__all__ = ["GuardFinding", "InputGuard", "OutputGuard", "scan_passage"]
