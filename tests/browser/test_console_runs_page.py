"""Runs across agents (issue 38, item 3): a Runs page filtered by agent, kind, status and date,
paged, with the filters in the address; a council lead's run page lists its members' runs; an
agent's decisions with their conviction history. Headless Chromium, offline model."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from playwright.sync_api import expect

from tests.browser.test_console import card_run, no_page_errors


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_the_runs_page_filters_across_agents(console, width, height):
    c = console(width=width, height=height)
    c.sign_in(f"runs-page-{width}")
    alpha = c.api("POST", "/api/agents", {"name": "Alpha", "defaultPrompt": "Look at alpha."})
    beta = c.api("POST", "/api/agents", {"name": "Beta", "defaultPrompt": "Look at beta."})
    for agent in (alpha, beta):
        c.wait_run(c.api("POST", f"/api/agents/{agent['id']}/runs", {})["runId"])
    c.api("POST", f"/api/agents/{alpha['id']}/sessions/dashboard/messages", {"message": "a chat turn about zebras"})
    c.page.goto("/#/agents")
    c.page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    rows = c.page.locator(".runs-results tbody tr")
    expect(rows).to_have_count(3)
    expect(c.page.locator(".runs-results")).to_contain_text("Alpha")
    expect(c.page.locator(".runs-results")).to_contain_text("Beta")
    c.page.get_by_label("Kind").select_option("manual")
    c.page.get_by_label("Agent").select_option(label="Beta")
    c.page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Beta")
    expect(rows.first).to_contain_text("manual")
    assert "kind=manual" in c.page.url and f"agentId={beta['id']}" in c.page.url
    c.shot(f"runs-page-{width}", full_page=False)
    c.page.goto(f"/#/agents/{alpha['id']}/runs")
    c.page.get_by_role("link", name="Filter and search").click()
    expect(c.page.get_by_label("Agent")).to_have_value(alpha["id"])
    expect(rows).to_have_count(2)
    c.page.goto("/#/runs?q=zebras")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("chat")
    today = datetime.now(UTC).date().isoformat()
    c.page.goto(f"/#/runs?status=awaiting_approval&since={today}")
    expect(c.page.get_by_label("Status")).to_have_value("awaiting_approval")
    expect(c.page.locator(".runs-results")).to_contain_text("No runs match these filters.")
    assert c.page.evaluate("document.scrollingElement.scrollWidth") <= width
    no_page_errors(c)


def test_a_council_leads_page_lists_its_members(console):
    c = console()
    c.sign_in("council-lead")
    one = c.api("POST", "/api/agents", {"name": "Macro", "persona": "You study macro."})
    two = c.api("POST", "/api/agents", {"name": "Flows", "persona": "You study flows."})
    lead = c.api("POST", "/api/agents", {"name": "Director", "defaultPrompt": "Decide.", "team": [one["id"], two["id"]]})
    run = c.wait_run(c.api("POST", f"/api/agents/{lead['id']}/runs", {"inputs": {"ticker": "ACME"}})["runId"])
    c.page.goto(f"/#/runs/{run['id']}")
    members = c.page.locator(".council-members")
    expect(members.get_by_role("heading")).to_have_text("Council members (2)")
    expect(members).to_contain_text("Macro")
    expect(members).to_contain_text("Flows")
    c.shot("council-members")
    members.get_by_role("link").first.click()
    expect(c.page.locator("dl.facts").first).to_contain_text("council_member")
    no_page_errors(c)


def test_an_agents_decisions_show_their_conviction_history(console, stack):
    c = console()
    c.sign_in("decider")
    agent, heartbeat = card_run(c, stack)
    child = c.api("POST", f"/api/runs/{heartbeat['id']}/re-examine", {})
    c.wait_run(child["runId"])
    c.page.goto(f"/#/agents/{agent['id']}/runs")
    c.page.get_by_role("link", name="Decisions").click()
    decision = c.page.locator("article.decision").first
    expect(decision).to_contain_text("trade-decision")
    expect(decision.locator(".conviction-history")).to_contain_text("Conviction:")
    c.shot("decisions")
    no_page_errors(c)
