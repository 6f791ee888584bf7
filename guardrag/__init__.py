"""guardrag: answers only from a verified knowledge base, refuses everything else with a reason."""

import os

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
