"""Replies read as Markdown (issue 38, item 1): headings, lists, tables, code blocks with a copy
button, links in a new tab with rel=noopener; and no HTML a model, a tool, a memory row or a fact
carries ever runs. The offline model repeats the person's words, so what is typed is what the
reply says. Headless Chromium at desktop and phone widths."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_console import no_page_errors

MARKDOWN = "here:\n\n# Plan\n\n- **first** step\n- second step\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\nprint('hi')\n```\n\nsee [the docs](https://example.com/docs)\n"

# Each would run code (or navigate to code) if it reached the page as HTML.
PAYLOADS = [
    '<script>window.__pwned = "script"</script>',
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "[click me](javascript:window.__pwned='link')",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="javascript:alert(1)" onclick="window.__pwned=1">raw</a>',
    "<svg onload=\"window.__pwned='svg'\"></svg>",
    '<iframe src="data:text/html,<script>parent.__pwned=1</script>"></iframe>',
]

HOSTILE_DOM = (
    ".message script, .message iframe, .message svg, .message img, .message [onerror], .message [onclick], "
    ".message [onload], .message a[href^='javascript'], .message a[href^='data'], "
    "main script, main iframe, main [onerror], main [onload], main a[href^='javascript'], main a[href^='data']"
)


def assert_nothing_ran(c) -> None:
    assert c.page.evaluate("() => window.__pwned === undefined")
    expect(c.page.locator(HOSTILE_DOM)).to_have_count(0)
    # a CSP refusal would mean the sanitiser let something through that only the CSP stopped
    assert not [e for e in c.errors if "Content Security Policy" in e], c.errors


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_a_reply_in_markdown_reads_as_formatted_text(console, width, height):
    c = console(width=width, height=height)
    c.context.grant_permissions(["clipboard-read", "clipboard-write"])
    c.sign_in(f"md-reader-{width}")
    agent = c.api("POST", "/api/agents", {"name": "Writer"})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    c.page.get_by_label("Message").fill(MARKDOWN)
    c.page.get_by_role("button", name="Send").click()
    reply = c.page.locator(".message.assistant .text.markdown").last
    expect(reply.get_by_role("heading", name="Plan")).to_be_visible()
    expect(reply.locator("li")).to_have_count(2)
    expect(reply.locator("li strong")).to_have_text("first")
    expect(reply.locator("table th")).to_have_count(2)
    expect(reply.get_by_role("columnheader", name="a")).to_be_visible()  # a table, on a phone too
    expect(reply.locator("pre code")).to_contain_text("print('hi')")
    link = reply.get_by_role("link", name="the docs")
    expect(link).to_have_attribute("href", "https://example.com/docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(reply).not_to_contain_text("**")
    reply.get_by_role("button", name="Copy the code").click()
    expect(reply.get_by_role("button", name="Copy the code")).to_have_text("Copied")
    assert c.page.evaluate("() => navigator.clipboard.readText()").strip() == "print('hi')"
    c.shot(f"markdown-reply-{width}", full_page=False)
    # reloaded, the transcript renders it the same way
    c.page.reload()
    expect(c.page.locator(".message.assistant .text.markdown").last.get_by_role("heading", name="Plan")).to_be_visible()
    no_page_errors(c)


def test_html_in_replies_tool_results_memories_and_facts_never_runs(console):
    c = console()
    c.sign_in("xss-target")
    agent = c.api("POST", "/api/agents", {"name": "Target", "agentMemory": True})
    for i, payload in enumerate(PAYLOADS):
        c.api("POST", f"/api/agents/{agent['id']}/memories", {"key": f"payload {i}", "value": f"zebra {payload}"})
        c.api("POST", "/api/me/facts", {"fact": f"I like {payload}"})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    for payload in PAYLOADS:  # the reply repeats each: the model said it
        c.page.get_by_label("Message").fill(f"note {payload}")
        c.page.get_by_role("button", name="Send").click()
        expect(c.page.locator(".message.assistant").last).to_contain_text("You said")
    # a tool's result carries them too (the recall tool reads the rows back), and the reply quotes it
    c.page.get_by_label("Message").fill("recall zebra")
    c.page.get_by_role("button", name="Send").click()
    expect(c.page.locator("details.tool-call").last).to_contain_text("recall")
    c.page.locator("details.tool-call summary").last.click()
    expect(c.page.locator("details.tool-call pre").last).to_contain_text("onerror")
    # raw HTML is shown as the text it is
    expect(c.page.locator(".message.assistant .text.markdown").first).to_contain_text("<script>")
    c.shot("xss-chat")
    assert_nothing_ran(c)
    c.page.goto(f"/#/memory/agent/{agent['id']}")
    expect(c.page.locator("main")).to_contain_text("onerror")
    c.shot("xss-memory")
    assert_nothing_ran(c)
    c.page.goto("/#/facts")
    expect(c.page.locator("main")).to_contain_text("onerror")
    c.shot("xss-facts")
    assert_nothing_ran(c)
    no_page_errors(c)
