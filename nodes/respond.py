"""respond: delivers the answer with its citations, the numbered paragraph its passage names
first.

The route and citations were set by the node that produced the answer. When the passage an
answer comes from names a numbered paragraph of its own document (a table row ending
"[1.4.1]", a sentence about "recommendation 1.4.1"; guardrag.core.kb.paragraphs), that
paragraph's chunk is cited first, labelled with its number ("NG12 p.16 (1.4.1)"), and the
passage itself after it: the paragraph is what the document states and where a reader checks
it (its full conditions, its context); the passage is where the answer's words are. A named
paragraph that does not state every figure of the answer (an update note naming the
paragraphs it amended) is cited after the passage instead, so the first citation always
holds the answer's figures. A model's "[n]" markers are renumbered to match. A number the
document has no paragraph for changes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.contract import Citation
from guardrag.core.grounding.split import renumber
from guardrag.core.kb.paragraphs import PARAGRAPHS, named_paragraphs, states_figures
from guardrag.graph.state import PipelineState, Turn
from guardrag.nodes.common import NodeRuntime, decide

log = logging.getLogger("guardrag.nodes")


def respond(state: PipelineState, config: RunnableConfig, runtime: NodeRuntime) -> dict[str, Any]:
    """Delivers the answer; cites first the numbered paragraphs its passage names."""
    update: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    try:
        named, later = _named(state, runtime)
    except Exception as exc:  # a citation lookup never costs the answer
        log.error("respond: paragraph lookup failed (%s: %s)", type(exc).__name__, exc)
        named, later = [], set()
    if named:
        update = _cited_first(state, named, later)
        detail["named_paragraphs"] = [c.label for c in named]
    answer = update.get("answer", state.get("answer", ""))
    return {
        **update,
        "history": [Turn(question=state["question"], answer=answer)],
        "trail": [decide("respond", "pass", state.get("route") or "answered", **detail)],
    }


def _named(state: PipelineState, runtime: NodeRuntime) -> tuple[list[Citation], set[str]]:
    """Citations of the numbered paragraphs the answer's cited passages name, in order, and
    those of them to cite after the passages (they do not state the answer's figures)."""
    citations = state.get("citations") or []
    later: set[str] = set()
    by_id = {str(p.payload.get("source_id", p.id)): p for p in state.get("passages") or []}
    cited_docs = [by_id[c.source_id] for c in citations if c.source_id in by_id]
    if not state.get("answer") or not any(p.payload.get("kind") == "doc" for p in cited_docs):
        return [], later  # an FAQ answer: no KB info read on its path
    info = runtime.context.store.kb_info(state["kb"])
    documents = info.extra.get(PARAGRAPHS) if info else None
    if not documents:
        return [], later
    found: dict[str, Citation] = {}
    for citation in citations:
        passage = by_id.get(citation.source_id)
        if passage is None:
            continue
        numbered = documents.get(str(passage.payload.get("source_file") or ""), {})
        text = str(passage.payload.get("text") or "")
        for number in named_paragraphs(state["answer"], text, numbered):
            source_id = numbered[number]
            if source_id in found:
                continue
            hits = runtime.context.store.find_by_field(state["kb"], "source_id", source_id, 1)
            if hits:
                payload = hits[0].payload
                label = str(payload.get("label") or payload.get("title") or source_id)
                found[source_id] = Citation(
                    source_id=source_id,
                    title=str(payload.get("title", "")),
                    url=payload.get("url"),
                    score=citation.score,
                    label=f"{label} ({number})",
                )
                if not states_figures(state["answer"], str(payload.get("text") or "")):
                    later.add(source_id)
    return list(found.values()), later


def _cited_first(state: PipelineState, named: list[Citation], later: set[str]) -> dict[str, Any]:
    """The citations with `named` first (those in `later` after the passages); a written
    answer's [n] markers follow its passages."""
    citations = state.get("citations") or []
    added = {c.source_id for c in named}
    rest = [c for c in citations if c.source_id not in added]
    first = [c for c in named if c.source_id not in later]
    ordered = [*first, *rest, *(c for c in named if c.source_id in later)]
    update: dict[str, Any] = {"citations": ordered}
    if state.get("route") == "generated":  # quoted text is the document's own: never rewritten
        position = {c.source_id: n for n, c in enumerate(ordered, start=1)}
        moved = {old: position[c.source_id] for old, c in enumerate(citations, start=1)}
        update["answer"] = renumber(state["answer"], moved, drop_unknown=False)
    return update
