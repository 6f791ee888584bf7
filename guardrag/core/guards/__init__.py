"""Input and output guards: typed refusals before retrieval and before the answer is shown,
and `scan_passage` for instructions hidden in knowledge-base text (indirect injection).

One module per guard, grouped by where it runs (`input/`, `output/`, `ingest/`; `shared/`
holds what several use); `registry.GUARDS` lists the input and output guards in run order.
`InputGuard` and `OutputGuard` are built on guardrails-ai and load it (offline, through
`framework`) on first use; the passage screen and the rules do not need it.
"""

from typing import TYPE_CHECKING, Any

from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.ingest.passages import scan_passage

if TYPE_CHECKING:
    from guardrag.core.guards.input_guard import InputGuard
    from guardrag.core.guards.output_guard import OutputGuard

__all__ = ["GuardFinding", "InputGuard", "OutputGuard", "scan_passage"]


def __getattr__(name: str) -> Any:
    """`InputGuard` and `OutputGuard`, imported (with guardrails-ai) when first asked for."""
    if name == "InputGuard":
        # lazy: the guard framework (guardrails-ai, ~1 s) loads with the question-time guards
        from guardrag.core.guards.input_guard import InputGuard

        return InputGuard
    if name == "OutputGuard":
        # lazy: see InputGuard
        from guardrag.core.guards.output_guard import OutputGuard

        return OutputGuard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
