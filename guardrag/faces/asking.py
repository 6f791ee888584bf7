"""How the faces run a question: progress as the pipeline's nodes finish, the draft's sentences
as each is verified (`faces/sentences.py`), the entries offered instead of an answer ("did
you mean"), and the audit guarantee (no answer leaves before its
audit record is stored or spooled)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from guardrag.contract import Result
from guardrag.core.audit import AuditUnavailable
from guardrag.faces.sentences import Sentence, SentenceGate
from guardrag.faces.service import Guardrag
from guardrag.graph.edges import ROUTES

# --- progress while the pipeline runs ---------------------------------------------------

Stage = Literal[
    "checking", "guards_passed", "searching", "rephrasing", "drafting", "verifying", "done"
]

#: What a customer reads while waiting, by stage: no node names, no reason codes.
STAGE_LABELS: dict[Stage, str] = {
    "checking": "Checking your question…",
    "guards_passed": "Question checked. Looking it up…",
    "searching": "Searching the help centre…",
    "rephrasing": "Rephrasing your question…",
    "drafting": "Drafting an answer from the help articles…",
    "verifying": "Checking the answer against the sources…",
    "done": "Done.",
}
#: The stage that starts when a node finishes with a passing verdict.
_NEXT_STAGE: dict[str, Stage] = {
    "start_turn": "checking",
    "moderate_input": "guards_passed",
    "contextualize": "guards_passed",
    "classify": "searching",
    "exact_match": "searching",
    "retrieve": "searching",
    "rephrase": "searching",
    "rerank": "drafting",
    "judge_passages": "drafting",
    "generate": "verifying",
    "ground": "verifying",
    "quote": "verifying",
    "moderate_output": "verifying",
    "respond": "done",
    "refuse": "done",
    "offer_choices": "done",
}


class Progress(BaseModel):
    """One step of a running question: which node finished, and the stage that starts now."""

    node: str
    verdict: str = ""
    stage: Stage
    label: str


def progress_of(node: str, update: dict[str, Any]) -> Progress | None:
    """The progress event for a node's state update (None for nodes outside the pipeline)."""
    stage = _NEXT_STAGE.get(node)
    if stage is None:
        return None
    trail = update.get("trail") or []
    verdict = str(getattr(trail[-1], "verdict", "")) if trail else ""
    if update.get("refusal") is not None:
        stage = "done"  # refused: the reply is being written, nothing else runs
    elif verdict == "hit":
        stage = "verifying"  # an FAQ entry was found: only the output check is left
    elif ROUTES.get(node, {}).get(verdict) == "rephrase":
        stage = "rephrasing"  # unsure: the model says the question again before a new search
    return Progress(node=node, verdict=verdict, stage=stage, label=STAGE_LABELS[stage])


# --- a finished question -----------------------------------------------------------------


@dataclass
class Asked:
    """A finished question as the faces see it."""

    result: Result

    def suggestions(self) -> list[str]:
        """The questions of the entries offered instead of an answer ("Did you mean ..."), the
        reranker's best first; none after any other outcome."""
        return [choice.title for choice in self.result.choices]


def ask_with_progress(
    bot: Guardrag,
    question: str,
    kb: str | None,
    *,
    thread_id: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    on_sentence: Callable[[Sentence], None] | None = None,
) -> Asked:
    """`bot.ask` that reports progress as nodes finish, with `on_sentence` each sentence of
    a generated draft once it is verified."""
    gate: SentenceGate | None = None
    if on_sentence:  # the deployment's knobs: the faces pass none of their own
        gate = SentenceGate(bot.services, question, on_sentence, bot.knobs_for(None))

    def step(node: str, update: dict[str, Any]) -> None:
        if gate is not None:
            gate.step(node, update)
        event = progress_of(node, update)
        if event is not None and on_progress is not None:
            on_progress(event)

    on_token = gate.feed if gate is not None else None
    result = bot.ask(question, kb, thread_id=thread_id, on_step=step, on_token=on_token)
    return Asked(result)


# --- the audit guarantee ----------------------------------------------------------------

#: How long a face waits for a request's audit record to be written or spooled.
AUDIT_CONFIRM_S = 10.0


def ensure_audited(bot: Guardrag, result: Result, timeout: float = AUDIT_CONFIRM_S) -> None:
    """Return once `result`'s audit record is in the store or the spool; raise
    AuditUnavailable when it is neither (only in memory, or not within `timeout`), unless the
    operator chose GUARDRAG_AUDIT_BEST_EFFORT. A bot without an audit log passes."""
    if bot.audit is None or bot.settings.audit_best_effort:
        return
    fate = bot.audit.confirm(result.request_id, timeout)
    if fate not in ("written", "spooled"):
        raise AuditUnavailable(
            "the audit log could not record this request (store and spool both failing), so "
            "it is not answered; operators: see the log, or set GUARDRAG_AUDIT_BEST_EFFORT"
        )
