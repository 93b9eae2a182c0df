"""A run's timeline in the console (issue 37, item 3): the chat links a reply to its run, whose
page draws the trace's spans as nested bars on a time axis (numbers on hover and keyboard focus, a
tool call opens its input and result). Headless Chromium, offline model, the sample MCP server on
loopback."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.axe import serious_violations
from tests.browser.test_console import no_page_errors


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_a_reply_links_to_its_runs_timeline(console, sample_servers, width, height):
    c = console(width=width, height=height)
    c.sign_in(f"timeline-{width}")
    conn = c.api("POST", "/api/connections", {"name": "market", "url": sample_servers.url("sample")})
    agent = c.api("POST", "/api/agents", {"name": "Traced", "persona": "You help.", "tools": [{"connectionId": conn["id"]}]})
    c.api("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": "use lookup_price for BTC"})
    page = c.page
    page.goto(f"/#/agents/{agent['id']}/chat")
    expect(page.locator(".message.assistant").last).to_contain_text("97250.5")
    page.get_by_role("link", name="Timeline of this reply").last.click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run run_"))).to_be_visible()
    spans = page.locator("ol.timeline > li.span-row")
    expect(spans.first).to_be_visible()
    assert spans.count() >= 3  # the turn, its model calls, the tool call (and memory, lease, commit)
    expect(page.locator(".timeline-summary")).to_contain_text("spans")
    # nested: the first span is the run's root, every other one sits under it
    assert "depth-0" in (spans.first.get_attribute("class") or "")
    model = spans.filter(has=page.locator(".span-kind.kind-chat")).first
    model.get_by_role("button").focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # reached from the keyboard: its numbers show
    expect(model.get_by_role("button")).to_be_focused()
    tip = model.locator(".span-tip")
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("tokens")
    expect(tip).to_contain_text("$")
    assert "depth-0" not in (model.get_attribute("class") or "")
    tool = spans.filter(has=page.locator(".span-kind.kind-tool")).first
    tool.get_by_role("button").click()
    expect(tool.locator(".span-input")).to_contain_text("BTC")
    expect(tool.locator(".span-result")).to_contain_text("97250.5")
    expect(tool.get_by_role("button")).to_have_attribute("aria-expanded", "true")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width
    assert serious_violations(page) == []
    c.shot(f"timeline-{width}")
    no_page_errors(c)
