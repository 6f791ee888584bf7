"""What the user reads when a question is refused, by refusal reason. Calm, specific, no blame."""

from __future__ import annotations

from guardrag.contract import RefusalReason as R

REFUSAL_MESSAGES: dict[R, str] = {
    R.EMPTY_INPUT: "Please type a question.",
    R.INPUT_TOO_LONG: "That message is too long. Please ask one question in a few sentences.",
    R.PROMPT_INJECTION: "I can only answer questions about {topics}.",
    R.JAILBREAK: "I can only answer questions about {topics}.",
    R.HARMFUL_REQUEST: "I can't help with that request.",
    R.PII: "I can't look up or share other people's personal information.",
    R.PERSONAL_DATA: "For your safety, please don't share personal details such as emails, "
    "phone numbers or ID numbers here. Please ask again without them.",
    R.CREDENTIAL_REQUEST: "I can never see, share or ask for PINs, passwords or one-time codes. "
    "Never share yours with anyone, including our staff.",
    R.SHARED_SECRET: "Please never share your PIN, password or one-time codes with anyone, "
    "here or with our staff. If you typed a real PIN or password, change it in the app.",
    R.PAYMENT_DATA: "Please don't share card numbers or security codes here. If you typed real "
    "card details, consider contacting your bank.",
    R.PROFANITY: "Let's keep it polite. How can I help with your account?",
    # Said of a question about the business the KB has no entry for as much as of an
    # unrelated one: both are true, neither tells the customer they asked off topic.
    R.OUT_OF_DOMAIN: "{Holder} has no answer to that; I can only answer from it.",
    R.NO_RELEVANT_DOCS: "I couldn't find an answer to that in {source}.",
    R.LOW_CONFIDENCE: "I'm not confident I have the right answer to that in {source}.",
    R.NOT_GROUNDED: "I couldn't find a reliable answer to that in {source}.",
    R.UNSAFE_OUTPUT: "I couldn't produce a safe answer to that. Please rephrase your question.",
    R.UNSAFE_SOURCE: "I can't show the answer {source} has to that here. Please contact support.",
    R.LLM_UNAVAILABLE: "I can't compose an answer right now. Please try again later.",
    R.INDEX_UNAVAILABLE: "{Source} is temporarily unavailable. Please try again later.",
    R.MODEL_UNAVAILABLE: "{Source} is temporarily unavailable. Please try again later.",
}

#: After a not-found refusal, the close entries offered instead (numbered, one per line).
CHOICES_INTRO = "These help articles may answer it:"
CHOICES_OUTRO = "Reply with a number to read one, or ask again in other words."

#: A several-part question's part the KB has no answer to, after the parts it answers.
UNCOVERED_PART = "I couldn't find an answer to “{part}” in our help centre."
#: A part an entry may answer, but not with confidence: that entry is named, not served.
UNSURE_PART = "I'm not sure our help centre answers “{part}”; the closest article is “{title}”."
GREETING_MESSAGE = "Hello! Ask me anything about {kb_title} and I'll answer from {source}."
FALLBACK_HINT = " You can browse all help articles at {url}."
#: What the answers come from: an FAQ KB's help centre, or its documents.
HELP_CENTRE = "our help centre"
HELP_CENTRE_TOPICS = "our help-centre topics"
THESE_DOCUMENTS = "these documents"


def source_phrase(documents: list[str] | None) -> str:
    """How refusals name a document KB: its one document's title, or "these documents"."""
    if not documents:
        return HELP_CENTRE
    return f"“{documents[0]}”" if len(documents) == 1 else THESE_DOCUMENTS


def _holder(kb_title: str, documents: list[str] | None) -> str:
    """What holds the answers, as the subject of a sentence: the KB's help centre, its one
    document, or "this knowledge base" for several documents."""
    if not documents:
        return f"The {kb_title} help centre"
    return f"“{documents[0]}”" if len(documents) == 1 else "This knowledge base"


def refusal_message(
    reason: R,
    kb_title: str,
    fallback_url: str | None,
    greeting: bool,
    documents: list[str] | None = None,
) -> str:
    """The user-facing text for a refusal; not-found refusals point to the help centre, or
    for a KB of documents (`documents`: their titles) to the documents."""
    text = GREETING_MESSAGE if greeting else REFUSAL_MESSAGES[reason]
    source = source_phrase(documents)
    text = text.format(
        kb_title=kb_title,
        source=source,
        Source=f"Searching {source}" if documents else "The help centre",
        Holder=_holder(kb_title, documents),
        topics=source if documents else HELP_CENTRE_TOPICS,
    )
    if fallback_url and reason in (
        R.OUT_OF_DOMAIN,
        R.NO_RELEVANT_DOCS,
        R.LOW_CONFIDENCE,
        R.NOT_GROUNDED,
    ):
        text += FALLBACK_HINT.format(url=fallback_url)
    return text
