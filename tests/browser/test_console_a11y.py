"""Keyboard and screen reader basics on the chat and memory pages (issue 38, item 5): labelled
controls, a focus order that follows the page, a streamed reply announced (aria-live), and no
serious or critical axe-core (WCAG 2.1 A/AA) violation, at desktop and phone widths."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.axe import serious_violations
from tests.browser.test_console import no_page_errors

SIZES = pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)], ids=["desktop", "phone"])


@SIZES
def test_the_chat_page_passes_axe_and_announces_replies(console, width, height):
    c = console(width=width, height=height)
    c.sign_in(f"a11y-chat-{width}")
    agent = c.api("POST", "/api/agents", {"name": "Spoken", "activeMemory": True})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    expect(c.page.locator(".live-badge")).to_have_text("Live")
    box = c.page.get_by_label("Message")
    expect(box).to_be_focused()
    box.fill("hello there, **world**")
    box.press("Enter")  # Enter sends
    expect(c.page.locator(".message.assistant").last).to_contain_text("hello there")
    # the transcript is a polite live region: a streamed reply is read out as it lands
    expect(c.page.locator(".transcript")).to_have_attribute("aria-live", "polite")
    expect(c.page.get_by_role("log")).to_contain_text("hello there")
    # keyboard: from the message box, Tab reaches the async box and then Send
    box.focus()
    c.page.keyboard.press("Tab")
    expect(c.page.get_by_label("Queue it (async)")).to_be_focused()
    c.page.keyboard.press("Tab")
    expect(c.page.get_by_role("button", name="Send")).to_be_focused()
    assert serious_violations(c.page) == []
    no_page_errors(c)


@SIZES
def test_the_memory_page_passes_axe_and_works_from_the_keyboard(console, width, height):
    c = console(width=width, height=height)
    c.sign_in(f"a11y-memory-{width}")
    agent = c.api("POST", "/api/agents", {"name": "Keeper", "agentMemory": True})
    for i in range(3):
        c.api("POST", f"/api/agents/{agent['id']}/memories", {"key": f"key {i}", "value": f"value {i}"})
    c.page.goto(f"/#/memory/agent/{agent['id']}")
    expect(c.page.locator(".memory-table tbody tr")).to_have_count(3)
    search = c.page.get_by_label("Search")
    search.focus()
    c.page.keyboard.type("key 2")  # every row shares a word; the one sharing both ranks first
    expect(c.page.locator(".memory-table tbody tr").first).to_contain_text("value 2")
    expect(c.page.get_by_role("status").filter(has_text="matching")).to_have_count(1)
    c.page.keyboard.press("Tab")
    expect(c.page.get_by_label("Source")).to_be_focused()
    assert serious_violations(c.page) == []
    no_page_errors(c)
