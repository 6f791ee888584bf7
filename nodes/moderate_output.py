"""moderate_output: the last check before a user sees an answer, whatever route produced it.

Decides on invariants that hold whatever the knowledge base says (guards.invariants): an
answer asking the customer to hand a PIN, OTP, password, CVV, card number or login to anyone or
any site, or to send or pay anything off the KB owner's domains or to a given account, is
refused, and the KB entries it came from that ask the same are held back
(kb.holdback: republished without them); links and e-mail addresses off the KB's allowed
domains are removed from the answer, with the hosts in the trail. Then the output guard's
validators on what is left (prompt leaks, PII, secrets or URLs absent from the cited sources,
profanity) and, as a backstop, the KB passage scan (instructions for a model). Every finding
refuses as `unsafe_output` (an attack), except profanity the KB's own text holds
(`unsafe_source`, kind policy: the operator's entry to mend).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from guardrag.config.prompts import LEAKABLE
from guardrag.contract import RefusalReason
from guardrag.core.guards.finding import GuardFinding
from guardrag.core.guards.ingest.passages import scan_passage
from guardrag.core.guards.output.invariants import (
    credential_ask,
    foreign_links,
    send_elsewhere,
    strip_foreign_links,
)
from guardrag.core.kb.holdback import hold_back_served
from guardrag.core.kb.quarantine import ALLOWED, Hold
from guardrag.graph.state import Candidate, PipelineState
from guardrag.nodes.common import NodeRuntime, decide, guard_refusal

NODE = "moderate_output"
log = logging.getLogger("guardrag.nodes")


def _allowed(runtime: NodeRuntime, kb: str) -> list[str]:
    try:
        info = runtime.context.store.kb_info(kb)
    except Exception:  # an unreadable index already refused earlier; never fail open here
        log.exception("moderate_output: cannot read %r's allowed domains", kb)
        return []
    return [str(d) for d in info.extra.get(ALLOWED, [])] if info else []


def _hold_back(
    runtime: NodeRuntime, kb: str, passages: list[Candidate], allowed: list[str]
) -> list[str]:
    """Hold back the passages that break an invariant themselves."""
    holds: dict[str, Hold] = {}
    for passage in passages:
        text = str(passage.payload.get("text") or "")
        found = credential_ask(text, allowed) or send_elsewhere(text, allowed)
        if found is not None:
            sid = str(passage.payload.get("source_id", passage.id))
            holds[sid] = Hold(found.rule, found.detail, text[:200], stage="served")
    if not holds:
        return []
    try:
        return hold_back_served(runtime.context.store, kb, holds)
    except Exception:  # the refusal stands; the operator still sees the log line
        log.exception("moderate_output: could not hold back %s", sorted(holds))
        return []


def moderate_output(
    state: PipelineState, config: RunnableConfig, runtime: NodeRuntime
) -> dict[str, Any]:
    kb, passages = state["kb"], state.get("passages", [])
    allowed = _allowed(runtime, kb)
    answer = state["answer"]
    asks = credential_ask(answer, allowed) or send_elsewhere(answer, allowed)
    if asks is not None:
        held = _hold_back(runtime, kb, passages, allowed)
        return _block(asks, held_back=held)
    links = foreign_links(answer, allowed) if allowed else []
    if links:
        answer = strip_foreign_links(answer, links)
    sources = [
        f"{p.payload.get('title', '')}\n{p.payload.get('text', '')}\n{p.payload.get('url') or ''}"
        for p in passages
    ]
    finding = runtime.context.output_guard.check(answer, sources, list(LEAKABLE)) or scan_passage(
        answer
    )
    if finding is not None:
        return _block(finding)
    if links:
        removed = sorted({link.host for link in links})
        trail = decide(
            NODE, "pass", "links off the allowed domains removed", removed=removed, allowed=allowed
        )
        return {"answer": answer, "trail": [trail]}
    return {"trail": [decide(NODE, "pass", "no guard fired")]}


def _block(finding: GuardFinding, **detail: Any) -> dict[str, Any]:
    # every finding is an unsafe output, but for profanity the KB's own text holds (the guard says)
    own_words = finding.reason is RefusalReason.UNSAFE_SOURCE
    reason = RefusalReason.UNSAFE_SOURCE if own_words else RefusalReason.UNSAFE_OUTPUT
    return {
        **guard_refusal(NODE, finding, reason, **detail),
        "answer": "",
        "citations": [],
    }
