"""Cost you can steer by, in the console (issue 37, item 4): the usage page draws cost (or tokens
while nothing costs anything) per day per agent over a date range, the costliest agents and
sessions, per model and per kind (the API's breakdown), what the cache saved; an agent's page shows
its last 30 days; numbers carry thousands separators. Headless Chromium, offline model."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.sync_api import expect

from tests.browser.axe import serious_violations
from tests.browser.test_console import no_page_errors

THOUSANDS = re.compile(r"\d,\d{3}")


def test_usage_over_a_range_per_agent_model_and_kind(console):
    c = console()
    c.sign_in("usage-steer")
    alpha = c.api("POST", "/api/agents", {"name": "Alpha", "persona": "You help."})
    beta = c.api("POST", "/api/agents", {"name": "Beta", "persona": "You help."})
    for agent, words in ((alpha, 40), (beta, 10)):
        c.api("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": "tell me about the sea " * words})
    page = c.page
    page.goto("/#/usage")
    legend = page.locator(".chart-box", has=page.locator("svg.chart-line")).locator(".legend")
    expect(legend).to_contain_text("Alpha")
    expect(legend).to_contain_text("Beta")
    expect(page.locator("svg.chart-line polyline")).to_have_count(2)  # a line per agent
    agents = page.locator("section", has=page.get_by_role("heading", name="Per agent", exact=True))
    expect(agents.locator("tbody tr").first).to_contain_text("Alpha")  # the costliest first
    expect(agents).to_contain_text(THOUSANDS)  # thousands separators
    expect(page.locator("section", has=page.get_by_role("heading", name="Per model"))).to_contain_text("offline")
    expect(page.locator("section", has=page.get_by_role("heading", name="Per kind"))).to_contain_text("chat")
    expect(
        page.locator("section", has=page.get_by_role("heading", name="Sessions that cost most")).locator("tbody tr")
    ).to_have_count(2)
    expect(page.locator(".cache-savings")).to_contain_text("The prompt cache saved")
    assert serious_violations(page) == []
    c.shot("usage-range")
    # the person's own limits, over all their agents: refused at the field, then saved
    daily = page.get_by_label("Your daily cost limit (USD)")
    daily.fill("-1")
    page.get_by_role("button", name="Save limits").click()
    expect(page.locator(".field", has=daily).locator(".field-error")).to_contain_text("dailyCostUsd")
    daily.fill("5")
    page.get_by_role("button", name="Save limits").click()
    expect(page.get_by_role("status").filter(has_text="Your limits are saved.")).to_be_visible()
    assert c.api("GET", "/api/me")["limits"] == {"dailyCostUsd": 5}
    # a range before anything happened shows nothing, and stays in the address
    week_ago = (datetime.now(UTC).date() - timedelta(days=7)).isoformat()
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    page.get_by_label("From", exact=True).fill(week_ago)
    page.get_by_label("To", exact=True).fill(yesterday)
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(rf"from={week_ago}&to={yesterday}"))
    expect(page.locator("section", has=page.get_by_role("heading", name="Per session"))).to_contain_text("No usage yet.")
    # an agent's page: its last 30 days
    page.goto(f"/#/agents/{alpha['id']}")
    last = page.locator(".agent-usage")
    expect(last.get_by_role("heading")).to_have_text("Last 30 days")
    expect(last.locator(".agent-usage-total")).to_contain_text(THOUSANDS)
    expect(last.locator("svg.chart-line")).to_be_visible()
    c.shot("agent-last-30-days")
    no_page_errors(c)
