"""The demo as a new user meets it, in a real browser (Debian chromium, as tests/test_browser.py
drives it): Stop leaves the page usable, the local demo's one operator rule holds on every
tab, the operator's views name what refused, and the wording fits the case."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from playwright.sync_api import Browser, expect

from guardrag.faces.api import create_app
from guardrag.graph.context import Services
from tests.test_api import TOP_UP, make_bot, serving
from tests.test_browser import (  # noqa: F401
    NEAR_MISS,
    NEEDS_GENERATION,
    ask,
    browser,
    open_page,
    pytestmark,
    services,
    sign_in,
    site,
    slow_site,
    snap,
)


@pytest.fixture(scope="module")
def demo_site(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # noqa: F811
    """The trusted local demo: no admin token, no chat model."""
    bot = make_bot(replace(services, chat_model=None), tmp_path_factory.mktemp("demo"))
    with serving(create_app(bot)) as base:
        yield base


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


def test_the_local_demo_keeps_one_operator_rule_on_every_tab(
    browser: Browser,  # noqa: F811
    demo_site: str,
) -> None:
    """No admin token: the banner, the Why? panel, the Audit and the Knowledge base tabs say
    and do the same thing (your own answers explained; the rest needs an operator)."""
    with open_page(browser, f"{demo_site}/ui/") as page:
        banner = page.locator("#sign-in-disabled")
        expect(banner).to_contain_text("explains your own answers")
        expect(banner).to_contain_text("The Audit and Knowledge base tabs need an operator")
        ask(page, TOP_UP)
        page.locator("#why").get_by_text("Why?").click()
        expect(page.locator("#trail")).to_contain_text("exact_match")
        snap(page, "demo-why.png")
        for tab, box in (("Audit", "#audit-disabled"), ("Knowledge base", "#kb-access")):
            page.get_by_role("tab", name=tab).click()
            expect(page.locator(box)).to_contain_text("This tab needs an operator")
            expect(page.locator(box)).to_contain_text("GUARDRAG_ADMIN_TOKEN")
        assert page.get_by_text("Sign in as an operator").count() == 0
        assert page.locator("#kb-file, #kb-ingest, #audit-show").count() == 0


def test_operator_views_name_the_rule_and_the_kb(browser: Browser, site: str) -> None:  # noqa: F811
    """The Why? panel names the rule that refused and lists the passages once; the Audit
    table has the KB column; an upload names its KB itself (no default); an off-topic
    refusal says the help centre has no answer."""
    with open_page(browser, f"{site}/ui/") as page:
        sign_in(page)
        ask(page, "What's the weather tomorrow?")
        expect(page.locator("#chat .bot").last).to_contain_text("help centre has no answer")
        ask(page, NEAR_MISS)
        page.locator("#why").get_by_text("Why?").click()
        why = page.locator("#why-text")
        expect(why).to_contain_text("Rule:")
        expect(why).to_contain_text("against threshold")
        assert why.inner_text().count("Passages considered") <= 1
        expect(page.locator("#trail")).to_contain_text("threshold")
        snap(page, "why-refusal.png")
        page.get_by_role("tab", name="Audit").click()
        page.locator("#audit-show").click()
        table = page.locator("#audit-table")
        expect(table).to_contain_text("kinetic")
        snap(page, "audit.png")
        page.get_by_role("tab", name="Knowledge base").click()
        expect(page.locator("#kb-name textarea, #kb-name input").first).to_have_value("")
