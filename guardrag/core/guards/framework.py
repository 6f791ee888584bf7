"""guardrails-ai, the guard framework, imported only through here.

Importing this module first keeps guardrails offline (`telemetry`), whatever imports it. The
rest of the guards package (passage screen, invariants, rules) never needs the framework, so
ingest does not pay its import (about a second).
"""

from guardrag.core.guards.telemetry import configure_guardrails_offline

configure_guardrails_offline()

from guardrails import Guard  # noqa: E402
from guardrails.validators import (  # noqa: E402
    FailResult,
    PassResult,
    ValidationResult,
    Validator,
    register_validator,
)

__all__ = [
    "FailResult",
    "Guard",
    "PassResult",
    "ValidationResult",
    "Validator",
    "register_validator",
]
