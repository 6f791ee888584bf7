"""What every tab of the UI shares: labels in two voices (plain words for customers; codes,
scores and the trail for operators), the operator sign-in check, and escaping (everything from
the KB or a model is escaped before it is shown)."""

from __future__ import annotations

import hmac
import html
import re
from collections.abc import Callable
from typing import Any

from pydantic import SecretStr

from guardrag.contract import Result
from guardrag.faces.views import safe_url

__all__ = ["safe_url"]  # the UI's links follow the one rule of views.safe_url

TRAIL_HEADERS = ["node", "verdict", "reason", "score", "threshold", "ms"]
AUDIT_HEADERS = ["time (UTC)", "kb", "request id", "question", "outcome", "route / reason", "ms"]
KB_HEADERS = ["name", "description", "entries", "snapshot", "last ingest"]
ENTRY_HEADERS = ["source id", "kind", "question / title", "answer / text", "url"]
QUARANTINE_HEADERS = ["knowledge base", "location", "source id", "why held back"]
ERROR_MESSAGE = "Sorry, something went wrong while answering. Please try again later."
THINKING = "*Checking your question…*"
STOPPED = "*Stopped: this answer was not finished. Ask again whenever you like.*"
DENIED = "Access denied: wrong or missing admin token."
SIGN_IN_FIRST = "Sign in as an operator (top of the page) to see this."
#: The trusted local demo's one rule (no admin token): a visitor sees why *their own* answers
#: were given; what reaches beyond their session (every request's audit record, listing,
#: browsing and changing knowledge bases) needs an operator. Banner, tabs and README say it.
DEMO_RULE = (
    "**Local demo, no operator configured.** The *Why?* panel under the chat explains your "
    "own answers. The Audit and Knowledge base tabs need an operator: set "
    "`GUARDRAG_ADMIN_TOKEN`, restart, and sign in at the top of the page."
)
NEEDS_OPERATOR = (
    "This tab needs an operator: set `GUARDRAG_ADMIN_TOKEN`, restart, and sign in at the top "
    "of the page. From a shell meanwhile: {commands}."
)
TOO_LONG = "This answer is too long to show here; please open the source below."
UPLOAD_TYPES = (".json", ".jsonl", ".csv", ".md", ".txt", ".pdf", ".html", ".htm", ".docx")
ALL = "all"
CSS = """
.route-badge {display: inline-block; padding: 2px 12px; border-radius: 999px; font-weight: 600}
.route-faq {background: #dcfce7; color: #166534}
.route-generated {background: #dbeafe; color: #1e40af}
.route-refused {background: #fee2e2; color: #991b1b}
.route-error {background: #fef3c7; color: #92400e}
#current-kb p {margin: 0; color: #475569}
"""
_MARKDOWN_LINK = re.compile(r"([\[\]])")
SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")

Message = dict[str, Any]
TrailRow = list[str | float | None]
Row = list[str | int | float | None]
FeedbackHandler = Callable[[str, int], None]

# --- the customer's voice: what happened, in plain words ---------------------------------

#: The pill under an answer or refusal, by route or refusal kind: never a code or a score.
CUSTOMER_BADGES = {
    "exact_match": ("From the help centre", "faq"),
    "semantic_match": ("From the help centre", "faq"),
    "quoted": ("Quoted from the document", "faq"),
    "generated": ("Written from help articles", "generated"),
    "not_found": ("Not in the help centre", "refused"),
    "blocked": ("Can't help with that here", "refused"),
    "policy": ("Not accepted here", "refused"),
    "error": ("Temporarily unavailable", "error"),
}


PARTIAL_BADGE = ("Partly answered: some parts are not in the help centre", "generated")


def escape_text(text: str) -> str:
    """HTML-escape text and neutralise markdown link/image brackets, so KB text cannot inject."""
    return _MARKDOWN_LINK.sub(r"\\\1", html.escape(text, quote=False))


def badge(result: Result | None) -> tuple[str, str]:
    """(plain words, colour) of the customer's pill for a result (None: the app failed)."""
    if result is None:
        return CUSTOMER_BADGES["error"]
    if result.refusal is None and result.uncovered:
        return PARTIAL_BADGE  # some parts of the question are named as not covered
    key = result.refusal.kind if result.refusal else (result.route or "exact_match")
    return CUSTOMER_BADGES.get(key, ("Answered", "faq"))


def badge_html(result: Result | None) -> str:
    text, kind = badge(result)
    return f'<span class="route-badge route-{kind}">{html.escape(text)}</span>'


def answer_text(result: Result) -> str:
    """What the chat shows as the reply: the answer, or the refusal's plain message (offered
    entries are shown as buttons, not as the numbered list a chat client gets)."""
    if result.outcome == "choices" and result.refusal is not None:
        return result.refusal.message
    return result.answer or (result.refusal.message if result.refusal else "")


def format_result(result: Result, max_bytes: int | None = None) -> str:
    """The assistant message a customer reads: the answer (or the refusal's plain message),
    then numbered source links. An answer over `max_bytes` is not shown at all."""
    text = answer_text(result)
    if max_bytes is not None and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        text = TOO_LONG
    parts = [escape_text(text)]
    links = []
    for number, citation in enumerate(result.citations, start=1):
        title = escape_text(citation.label or citation.title or citation.source_id)
        url = safe_url(citation.url)
        label = f"\\[{number}\\] {title}"
        links.append(f"[{label}]({url})" if url else label)
    if links:
        parts.append("Sources:  \n" + "  \n".join(links))
    return "\n\n".join(parts)


# --- the operator's voice: codes, scores, thresholds, the trail --------------------------


def trail_rows(result: Result | None) -> list[TrailRow]:
    """The decision trail as table rows (node, verdict, reason, score, threshold, ms)."""
    if result is None:
        return []
    return [
        [
            d.node,
            d.verdict,
            d.reason,
            None if d.score is None else round(d.score, 3),
            None if d.threshold is None else round(d.threshold, 3),
            round(d.ms, 1),
        ]
        for d in result.trail
    ]


def why_markdown(result: Result | None) -> str:
    """For operators: the decision in codes (route or reason, stage, kind), confidence, the
    follow-up as rewritten, the passages considered with their scores, the request id."""
    if result is None:
        return "The app failed before the pipeline gave a result (see the server log)."
    lines = []
    if result.refusal is not None:
        r = result.refusal
        lines.append(f"**Refused**: `{r.reason.value}` ({r.kind}, at `{r.stage}`)")
        lines.extend(_rule_line(result, r.stage))
    else:
        lines.append(f"**Answered**: `{result.route}` · confidence {result.confidence:.2f}")
    for decision in result.trail:
        if decision.node == "contextualize" and decision.detail.get("standalone"):
            standalone = escape_text(str(decision.detail["standalone"]))
            lines.append(f"**Follow-up rewritten as**: {standalone}")
    ranked = [d for d in result.trail if d.node == "rerank" and d.detail.get("top")]
    if ranked:  # the last ranking only: after a rephrase, the one the decision was made on
        top = ", ".join(
            f"`{escape_text(str(t.get('source_id')))}` {t.get('score')}"
            for t in ranked[-1].detail["top"]
        )
        lines.append(f"**Passages considered** (fused score): {top}")
    if result.citations:
        cited = ", ".join(f"`{escape_text(c.source_id)}` {c.score}" for c in result.citations)
        lines.append(f"**Cited**: {cited}")
    lines.append(f"{result.latency_ms:.0f} ms · request `{escape_text(result.request_id)}`")
    return "  \n".join(lines)


def _rule_line(result: Result, stage: str) -> list[str]:
    """The rule that refused, in the refusing stage's own words, with its score against its
    threshold (empty when that stage left no reason)."""
    decisions = [d for d in result.trail if d.node == stage and d.verdict != "pass"]
    if not decisions or not decisions[-1].reason:
        return []
    d = decisions[-1]
    measured = (
        f" (score {d.score:.3f} against threshold {d.threshold:.3f})"
        if d.score is not None and d.threshold is not None
        else ""
    )
    return [f"**Rule**: {escape_text(d.reason)}{measured}"]


def token_ok(expected: SecretStr | None, given: str | None) -> bool:
    """Constant-time comparison with the admin token; always False when none is configured
    or nothing (or only blanks) was given."""
    if expected is None or not given or not given.strip():
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.get_secret_value().encode()
    )
