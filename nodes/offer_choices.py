"""offer_choices: a not-found refusal after retrieval offers the FAQ entries the reranker
found relevant (rerank score >= `min_relevance`), or passes on to `refuse` when there are none.

The reply says why there is no answer (the refusal's own message), then lists up to three
entries, the reranker's best first. Picking one (a click in the UI, its number in a chat
client: `contextualize` reads "2" as that entry's question) asks the entry's own question,
which the FAQ answers verbatim. The outcome is "choices", never an answer: no citations, and
the refusal reason stays in the result and the trail.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.core.choices import listed, offerable
from guardrag.graph.state import PipelineState, Turn
from guardrag.nodes.common import NodeRuntime, decide, knobs, refusal_text


def offer_choices(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    """Writes the refusal's message and the numbered entries as the reply."""
    refusal = state["refusal"]
    assert refusal is not None, "offer_choices reached without a refusal"
    floor = knobs(config).min_relevance
    choices = offerable(state.get("candidates") or [], floor)
    if not choices:
        return {
            "trail": [
                decide("offer_choices", "miss", "no relevant entry to offer", threshold=floor)
            ]
        }
    message = refusal_text(state, runtime, refusal)
    reply = "\n".join([message, "", *listed(choices)])
    titles = [choice.title for choice in choices]
    return {
        "history": [Turn(question=state["question"], answer=reply, choices=titles)],
        "refusal": refusal.model_copy(update={"message": message}),
        "answer": reply,
        "choices": choices,
        "route": None,
        "citations": [],
        "confidence": 0.0,
        "trail": [
            decide(
                "offer_choices",
                "miss",
                f"{refusal.reason.value}: {len(choices)} relevant entries offered instead",
                score=choices[0].score,
                threshold=floor,
                offered=[choice.source_id for choice in choices],
                stage=refusal.stage,
            )
        ],
    }
