"""guardrag: answers only from a verified knowledge base, refuses everything else with a reason.

    from guardrag import Guardrag
    bot = Guardrag.from_settings()
    result = bot.ask("How do I top up?", kb="kinetic")

Importing the package sets a few environment defaults, here and nowhere else: the libraries
below read them when they are first imported, so they must be set before any of them loads.
An operator's own value always wins (setdefault).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guardrag.faces.service import Guardrag

# Offline by default: no hub downloads, no analytics, no telemetry exporters. setdefault, so an
# operator who really wants one of them can still turn it on explicitly.
for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "OTEL_SDK_DISABLED": "true",
    "LANGSMITH_TRACING": "false",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_name, _value)

__version__ = "0.1.0"
__all__ = ["Guardrag", "__version__"]


def __getattr__(name: str) -> Any:
    """`guardrag.Guardrag`, imported on first use: `import guardrag` stays light."""
    if name == "Guardrag":
        from guardrag.faces.service import Guardrag  # lazy: the whole pipeline loads here

        return Guardrag
    raise AttributeError(f"module 'guardrag' has no attribute {name!r}")
