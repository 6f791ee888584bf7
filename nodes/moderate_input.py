"""moderate_input: refuses attacks and sensitive data before anything else reads the question.

Decides on the input guard's validators (length, injection, jailbreak, harmful intent, PII,
payment data, credential requests, profanity, then semantic similarity to attack exemplars),
cheapest first; the first finding blocks. Embeds the question once for every later stage.
In `pii="redact"` mode, personal values are masked instead and the masked question goes on.
A message that is the KB's own question, word for word, is not refused on the learned
classifier's estimate alone (`screening.own_question`). When the embedding model fails, the
question is refused (kind "error") with the failure in the trail and one log line, and the
next question tries the model again.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.core.screening import EmbeddingFailed, Screened, own_question, screen
from guardrag.graph.state import PipelineState
from guardrag.nodes.common import NodeRuntime, decide, embedding_failed, knobs, screened_update

NODE = "moderate_input"


def moderate_input(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    services = runtime.context
    question = state.get("question") or ""
    limit = knobs(config).max_input_chars
    try:
        found = screen(services.input_guard, services.embedder, question, limit)
    except EmbeddingFailed as failed:
        return embedding_failed(NODE, failed)
    entry = own_question(services.store, state["kb"], found)
    if entry is not None:
        return _overruled(found, entry)
    return screened_update(NODE, found, question)


def _overruled(found: Screened, entry: str) -> dict[str, Any]:
    """The learned alarm on a message that is the KB's own question: it goes on (exact_match
    serves the entry), and the trail keeps the alarm it overruled."""
    assert found.finding is not None and found.vector is not None
    alarm = found.finding
    decision = decide(
        NODE,
        "pass",
        f"{alarm.rule} overruled: the message is the question of KB entry {entry}",
        alarm.score,
        alarm.threshold,
        source_id=entry,
        overruled=alarm.detail,
    )
    return {"query_vector": found.vector.tolist(), "trail": [decision]}
