"""Tool servers in the console (issue 27, item 8): add a server, test it (its tools, or what is
wrong), give an agent some of its tools, watch the agent call one in the chat with the connection
and the duration on the block, and read a cut result in full. Headless Chromium, offline model,
the sample MCP server of local/sample_mcp.py and a faulty one on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.test_console import no_page_errors
from tests.mcp_servers import McpServers


@pytest.fixture(scope="module")
def servers() -> Iterator[McpServers]:
    running = McpServers.start()
    yield running
    running.running.stop()


def test_a_person_adds_a_tool_server_and_an_agent_uses_it(console, servers):
    c = console()
    c.sign_in("tool-user")
    page = c.page
    page.get_by_role("link", name="Tools").click()
    page.get_by_role("heading", name="Tool servers").wait_for()
    expect(page.get_by_text("No tool servers yet")).to_be_visible()

    # A server that is not MCP: the test names the problem.
    page.get_by_label("Name").fill("shop")
    page.get_by_label("URL").fill(servers.url("shop"))
    page.get_by_role("button", name="Add server").click()
    expect(page.get_by_text("shop: not working")).to_be_visible()
    expect(page.locator(".test-result .error")).to_contain_text("not_mcp")

    # The sample server, with an auth value that is never shown again.
    page.get_by_label("Name").fill("market")
    page.get_by_label("URL").fill(servers.url("sample"))
    page.get_by_label("Auth value").fill("Bearer not-needed-here")
    page.get_by_role("button", name="Add server").click()
    expect(page.get_by_text("market: 2 tool(s)")).to_be_visible()
    expect(page.get_by_text("mcp__market__lookup_price")).to_be_visible()
    expect(page.get_by_text("Authorization set")).to_be_visible()
    assert "not-needed-here" not in page.content()
    c.shot("tools")

    # An agent with only lookup_price of it.
    page.get_by_role("link", name="Agents", exact=True).click()
    page.get_by_role("link", name="New agent").click()
    page.get_by_label("Name").fill("Trader")
    page.get_by_label("market").check()
    page.get_by_label("search_tickets").uncheck()
    c.shot("agent-form-tools")
    page.get_by_role("button", name="Create agent").click()
    page.get_by_role("button", name="Done").click()
    page.get_by_role("heading", name="Trader").wait_for()
    expect(page.get_by_text("market (lookup_price)")).to_be_visible()

    page.get_by_role("link", name="Chat").click()
    page.get_by_label("Message").fill("use lookup_price for BTC")
    page.get_by_role("button", name="Send").click()
    block = page.locator(".tool-call").first
    expect(block).to_contain_text("mcp__market__lookup_price")
    expect(block.locator(".tool-meta")).to_contain_text("market")
    expect(block.locator(".tool-meta")).to_contain_text("ms")
    block.locator("summary").click()
    expect(block).to_contain_text("97250.5")
    c.shot("chat-mcp-tool")
    no_page_errors(c)


def test_a_cut_result_can_be_read_in_full(console, servers):
    c = console()
    c.sign_in("tool-reader")
    conn = c.api("POST", "/api/connections", {"name": "faulty", "url": servers.url("faulty")})
    agent = c.api("POST", "/api/agents", {"name": "Reader", "tools": [{"connectionId": conn["id"]}]})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    page = c.page
    page.get_by_label("Message").fill("use huge with 20000")
    page.get_by_role("button", name="Send").click()
    block = page.locator(".tool-call").first
    expect(block.locator(".tool-meta")).to_contain_text("faulty")
    block.locator("summary").click()
    expect(block.locator("pre").last).to_contain_text("[cut: 16000 of 20000 characters")
    block.get_by_role("button", name="Show the full result (20000 characters)").click()
    expect(block.locator("pre").last).not_to_contain_text("[cut:")
    assert len(block.locator("pre").last.inner_text()) == 20000
    c.shot("chat-full-result")
    no_page_errors(c)


def test_a_servers_health_shows_on_the_tools_page(console, servers):
    c = console()
    c.sign_in("tool-health")
    c.api("POST", "/api/connections", {"name": "market", "url": servers.url("sample")})
    c.api("POST", "/api/connections", {"name": "gone", "url": "http://127.0.0.1:9/mcp"})
    page = c.page
    page.get_by_role("link", name="Tools").click()
    page.get_by_role("heading", name="Tool servers").wait_for()
    market = page.locator("tr", has_text="market")
    gone = page.locator("tr", has_text="gone")
    expect(market.locator(".health")).to_contain_text("not used yet")
    market.get_by_role("button", name="Test").click()
    expect(market.locator(".health")).to_contain_text("healthy")

    # A server that cannot be reached: degraded after one failure, down after two, with the error
    # and until when turns skip it.
    gone.get_by_role("button", name="Test").click()
    expect(gone.locator(".health")).to_contain_text("degraded")
    expect(gone.locator(".health")).to_contain_text("unreachable")
    gone.get_by_role("button", name="Test").click()
    expect(gone.locator(".health")).to_contain_text("down")
    expect(gone.locator(".health")).to_contain_text("skipped until")
    gone.get_by_role("button", name="Tools").click()
    facts = page.locator(".health-facts")
    expect(facts).to_contain_text("Failures in a row")
    expect(facts).to_contain_text("could not be reached")
    expect(facts).to_contain_text("Not contacted before")
    c.shot("tools-health")
    no_page_errors(c)
