"""Tool approvals in the console (issue 34, item 5): a turn that asks for a tool its owner must
approve shows the held call (tool, connection, input, expiry) with Approve / Deny and a note, in
the chat (over the socket, and over HTTP from the sync turn's 202) and on the run's page; the
turn goes on after the decision; the agents list and the navigation say what waits; the agent
form sets the rules and the limits, with the API's validation errors by their field. Headless
Chromium, offline model, the sample MCP server of local/sample_mcp.py on loopback."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.axe import serious_violations
from tests.browser.test_console import no_page_errors


def market_agent(c: Any, servers: Any, name: str, grant: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """An agent with the sample server's tools (`grant` adds to its grant, `fields` to the agent)."""
    conn = c.api("POST", "/api/connections", {"name": "market", "url": servers.url("sample")})
    tools = [{"connectionId": conn["id"], **(grant or {})}]
    return c.api("POST", "/api/agents", {"name": name, "persona": "You help.", "tools": tools, **fields})


def careful_agent(c: Any, servers: Any, name: str = "Careful") -> dict[str, Any]:
    """An agent whose lookup_price calls wait for its owner (search_tickets runs at once)."""
    return market_agent(c, servers, name, {"requireApproval": ["lookup_price"]})


def wait_status(c: Any, run_id: str, status: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = c.api("GET", f"/api/runs/{run_id}")
        if run["status"] == status:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} never became {status}")


def say_live(page: Any, agent_id: str, message: str) -> None:
    """Opens the agent's chat, waits for its live socket and sends `message` with Enter."""
    page.goto(f"/#/agents/{agent_id}/chat")
    expect(page.locator(".live-badge")).to_have_text("Live")
    page.get_by_label("Message").fill(message)
    page.get_by_label("Message").press("Enter")


def test_approving_in_the_chat_lets_the_turn_go_on(console, sample_servers):
    c = console()
    c.sign_in("approver")
    agent = careful_agent(c, sample_servers)
    page = c.page
    say_live(page, agent["id"], "use lookup_price for BTC")
    card = page.locator(".approval")
    expect(card).to_have_count(1)
    expect(card.get_by_role("heading")).to_contain_text("lookup_price")
    expect(card.locator(".approval-connection")).to_have_text("market")
    expect(card.locator(".approval-input")).to_contain_text('"symbol": "BTC"')  # pretty-printed
    expect(card.locator(".approval-expiry")).to_contain_text("expires")
    expect(page.get_by_text("No messages yet")).to_be_hidden()  # the empty session's line goes once a turn is sent
    # the navigation counts what waits, and the agents list marks the agent
    expect(page.locator(".nav-waiting")).to_contain_text("1")
    # a new message meanwhile is refused (approval_pending), kept in the box, and the call stays shown once
    page.get_by_label("Message").fill("are you still there?")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".chat-error .error")).to_have_attribute("data-code", "approval_pending")
    expect(page.get_by_label("Message")).to_have_value("are you still there?")
    expect(card).to_have_count(1)
    assert serious_violations(page) == []
    c.shot("approval-chat")

    other = console("approval-agents-list")
    other.sign_in("approver")
    expect(other.page.locator(".agent-card", has_text="Careful").locator(".waiting-mark")).to_have_text("1 waiting for approval")
    other.shot("approval-agents-list")

    card.get_by_label("Note (optional)").fill("fine, go ahead")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".approval-status")).to_contain_text("Approved")
    # the resumed turn streams in: the tool's result reaches the reply, then the transcript
    expect(page.locator(".message.assistant").last).to_contain_text("97250.5")
    expect(page.locator(".nav-waiting")).to_be_hidden()
    expect(page.get_by_role("link", name="Timeline of this reply").last).to_be_visible()
    c.shot("approval-chat-approved")
    run = c.api("GET", f"/api/runs?agentId={agent['id']}")["items"][0]
    assert run["status"] == "succeeded"
    assert [a["decision"] for a in run["pendingApprovals"]] == ["approve"]
    no_page_errors(c)
    no_page_errors(other)


def test_denying_over_http_tells_the_agent(console, sample_servers):
    c = console()
    c.context.add_init_script("window.WebSocket = undefined;")
    c.sign_in("denier")
    agent = careful_agent(c, sample_servers, "Guarded")
    page = c.page
    page.goto(f"/#/agents/{agent['id']}/chat")
    expect(page.locator(".live-badge")).to_have_text("HTTP")
    page.get_by_label("Message").fill("use lookup_price for ETH")
    page.get_by_role("button", name="Send").click()
    card = page.locator(".approval")  # from the sync turn's 202
    expect(card.locator(".approval-input")).to_contain_text('"symbol": "ETH"')
    expect(page.locator(".awaiting .message.user")).to_contain_text("use lookup_price for ETH")
    page.reload()  # the page opened again: the session's paused run shows its call
    expect(card.locator(".approval-input")).to_contain_text('"symbol": "ETH"')
    expect(page.locator(".awaiting .message.user")).to_contain_text("use lookup_price for ETH")
    card.get_by_label("Note (optional)").fill("not now")
    card.get_by_role("button", name="Deny").click()
    expect(card.locator(".approval-status")).to_contain_text("Denied")
    # the run goes on in the background; the transcript then holds the whole exchange
    expect(page.locator(".message.user").last).to_contain_text("use lookup_price for ETH")
    block = page.locator(".tool-call").last
    expect(block).to_contain_text("error")
    block.locator("summary").click()
    expect(block).to_contain_text("not now")
    expect(page.locator(".awaiting")).to_have_count(0)
    expect(page.locator(".nav-waiting")).to_be_hidden()  # nothing waits any more
    expect(page.locator(".sessions .current")).to_contain_text("4 msgs")
    c.shot("approval-http-denied")
    no_page_errors(c)


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_a_paused_run_is_decided_on_its_page(console, sample_servers, width, height):
    c = console(width=width, height=height)
    c.sign_in(f"run-approver-{width}")
    agent = careful_agent(c, sample_servers, "Nightly")
    started = c.api("POST", f"/api/agents/{agent['id']}/runs", {"prompt": "use lookup_price for SOL"})
    wait_status(c, started["runId"], "awaiting_approval")
    page = c.page
    page.goto(f"/#/runs?status=awaiting_approval&agentId={agent['id']}")
    page.locator(".runs-results").get_by_role("link").first.click()
    section = page.locator(".run-approvals")
    expect(section.get_by_role("heading", level=2)).to_have_text("Waiting for your approval (1)")
    expect(section.locator(".approval-input")).to_contain_text("SOL")
    assert serious_violations(page) == []
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width
    c.shot(f"approval-run-page-{width}")
    section.get_by_role("button", name="Approve").click()
    expect(page.locator(".run-status")).to_contain_text("succeeded")
    expect(page.locator(".run-approvals .approval-decided")).to_contain_text("approved")
    expect(page.locator(".reply")).to_contain_text("182.3")
    no_page_errors(c)


def test_the_agent_form_sets_rules_and_limits_and_shows_errors_by_field(console, sample_servers):
    c = console()
    c.sign_in("rule-maker")
    conn = c.api("POST", "/api/connections", {"name": "market", "url": sample_servers.url("sample")})
    c.api("POST", f"/api/connections/{conn['id']}/test")  # its tools listed, for the picker
    agent = c.api("POST", "/api/agents", {"name": "Spender", "tools": [{"connectionId": conn["id"]}]})
    page = c.page
    page.goto(f"/#/agents/{agent['id']}/edit")
    row = page.locator(".connection-pick", has_text="market")
    row.get_by_label("Needs your approval").select_option("some")
    row.get_by_label("Tools that wait (comma-separated)").fill("lookup_price")
    page.get_by_label("remember (save a fact about you)").check()
    page.get_by_label("Daily cost limit (USD)").fill("-5")
    page.get_by_label("Tool calls per turn").fill("3")
    page.get_by_role("button", name="Save").click()
    error = page.locator(".field", has=page.get_by_label("Daily cost limit (USD)")).locator(".field-error")
    expect(error).to_contain_text("dailyCostUsd")
    expect(page.get_by_label("Daily cost limit (USD)")).to_be_focused()
    assert serious_violations(page) == []
    c.shot("agent-form-rules-error")
    page.get_by_label("Daily cost limit (USD)").fill("2.5")
    page.get_by_label("Monthly cost limit (USD)").fill("40")
    page.get_by_role("button", name="Save").click()
    page.get_by_role("heading", name="Spender", exact=True).wait_for()
    saved = c.api("GET", f"/api/agents/{agent['id']}")
    assert saved["tools"][0]["requireApproval"] == ["lookup_price"]
    assert saved["requireApproval"] == ["remember"]
    assert saved["limits"] == {"dailyCostUsd": 2.5, "monthlyCostUsd": 40, "toolCallsPerTurn": 3}
    facts = page.locator("dl.facts").first
    expect(facts).to_contain_text("approval for lookup_price")
    expect(facts).to_contain_text("$2.5 a day · $40 a month · 3 tool calls a turn")
    c.shot("agent-page-rules")
    # the form shows what is set
    page.goto(f"/#/agents/{agent['id']}/edit")
    expect(row.get_by_label("Needs your approval")).to_have_value("some")
    expect(page.get_by_label("Tool calls per turn")).to_have_value("3")
    no_page_errors(c)


def test_a_turn_past_a_limit_says_which_limit_in_the_chat(console, sample_servers):
    c = console()
    c.sign_in("limited")
    agent = market_agent(c, sample_servers, "Capped", limits={"toolCallsPerTurn": 1})
    page = c.page
    say_live(page, agent["id"], "use lookup_price for BTC and use search_tickets with login")
    error = page.locator(".chat-error .error")
    expect(error).to_have_attribute("data-code", "limit_exceeded")
    expect(error).to_contain_text("Limit reached:")
    expect(error.locator(".limit-line")).to_contain_text("The agent’s tool calls per turn: 1")
    c.shot("limit-exceeded-chat")
    no_page_errors(c)


def test_a_run_on_the_shared_session_pausing_shows_up_live_in_the_chat(console, sample_servers):
    c = console()
    c.sign_in("shared-approver")
    agent = market_agent(c, sample_servers, "Shared", {"requireApproval": True}, activeMemory=True)
    page = c.page
    page.goto(f"/#/agents/{agent['id']}/chat")
    expect(page.locator(".live-badge")).to_have_text("Live")
    c.api("POST", f"/api/agents/{agent['id']}/runs", {"prompt": "use lookup_price for AAPL"})
    card = page.locator(".approval")  # the manual run on the shared session, as it pauses
    expect(card.locator(".approval-input")).to_contain_text("AAPL")
    expect(page.locator(".live-turn .message.user")).to_contain_text("use lookup_price for AAPL")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator(".message.assistant").last).to_contain_text("231.4")
    expect(page.locator(".message.user.arrived .role").last).to_have_text("Manual run")
    c.shot("approval-shared-session")
    no_page_errors(c)
