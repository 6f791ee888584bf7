"""Stop in a real browser: the page stays usable, the stopped bubble says so, and the next
question is answered."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from tests.test_api import TOP_UP
from tests.test_browser import (  # noqa: F401
    NEEDS_GENERATION,
    browser,
    open_page,
    pytestmark,
    services,
    slow_site,
    snap,
)


def test_stop_says_stopped_and_the_next_question_is_answered(
    browser: Browser,  # noqa: F811
    slow_site: str,  # noqa: F811
) -> None:
    with open_page(browser, f"{slow_site}/ui/") as page:
        page.locator("#question textarea").fill(NEEDS_GENERATION)
        page.locator("#ask").click()
        expect(page.locator("#chat .bot").last).to_contain_text("Rephrasing your question")
        page.locator("#stop").click()
        expect(page.locator("#chat .bot").last).to_contain_text("Stopped", timeout=5_000)
        page.wait_for_timeout(4_000)  # the stopped pipeline's own end, had it leaked through
        expect(page.locator(".toast-wrap .error, .error")).to_have_count(0)
        snap(page, "chat-stopped.png")
        page.locator("#question textarea").fill(TOP_UP)
        page.locator("#question textarea").press("Enter")
        expect(page.locator("#chat .bot")).to_have_count(2)
        expect(page.locator("#chat .bot").last).to_contain_text("top up", timeout=30_000)
        expect(page.locator("#chat .bot").first).to_contain_text("Stopped")
