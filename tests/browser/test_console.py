"""The console as a person uses it, in headless Chromium against the local stack (offline model).

Each test leaves screenshots in test-artifacts/console/; the README's console section shows copies
of them from docs/console/.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.sync_api import expect

# Chromium logs every 4xx answer as a console error; the page itself must raise nothing.
_HTTP_NOISE = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d")


def no_page_errors(c) -> None:
    real = [e for e in c.errors if not _HTTP_NOISE.search(e)]
    assert real == [], real


def create_agent_in_page(c, name: str, persona: str = "You help.", **fields) -> str:
    page = c.page
    page.get_by_role("link", name="New agent").click()
    page.get_by_label("Name").fill(name)
    page.get_by_label("Persona").fill(persona)
    for label, value in fields.items():
        page.get_by_label(label.replace("_", " ").capitalize()).fill(value)
    page.get_by_role("button", name="Create agent").click()
    page.get_by_role("button", name="Done").click()  # the webhook secret, shown once
    page.get_by_role("heading", name=name).wait_for()
    return page.url.rsplit("/", 1)[-1]


def test_two_users_each_see_only_their_own_agents(console):
    alice = console("alice")
    alice.sign_in("alice-agents")
    expect(alice.page.get_by_text("No agents yet")).to_be_visible()
    alice.page.get_by_role("link", name="New agent").click()
    alice.shot("agent-form")
    alice.page.get_by_role("link", name="Agents", exact=True).click()
    create_agent_in_page(alice, "Alice's analyst", "You analyse markets.")
    alice.shot("agent-detail")

    bob = console("bob")
    bob.sign_in("bob-agents")
    expect(bob.page.get_by_text("No agents yet")).to_be_visible()
    create_agent_in_page(bob, "Bob's helper")
    bob.page.get_by_role("link", name="Agents", exact=True).click()
    expect(bob.page.locator(".agent-card")).to_have_count(1)
    expect(bob.page.get_by_text("Alice's analyst")).to_have_count(0)

    alice.page.get_by_role("link", name="Agents", exact=True).click()
    expect(alice.page.locator(".agent-card")).to_have_count(1)
    expect(alice.page.get_by_role("link", name="Alice's analyst")).to_be_visible()
    expect(alice.page.get_by_text("Bob's helper")).to_have_count(0)
    alice.shot("agents")
    # The token is in this tab's sessionStorage only, never in localStorage.
    assert alice.page.evaluate("Object.keys(localStorage).length") == 0
    assert alice.page.evaluate("sessionStorage.getItem('engram.token')") == "dev-alice-agents"
    no_page_errors(alice)
    no_page_errors(bob)


def test_chat_shows_the_tool_call_and_the_fact_can_be_archived_and_restored(console):
    c = console("chat")
    c.sign_in("carol")
    create_agent_in_page(c, "Coach")
    c.page.get_by_role("link", name="Chat").first.click()
    box = c.page.get_by_label("Message")
    box.fill("remember that I prefer green tea over coffee")
    box.press("Enter")  # Enter sends
    tool = c.page.locator("details.tool-call", has_text="remember")
    expect(tool).to_be_visible()
    expect(c.page.locator(".turn-usage")).to_contain_text("Last turn:")
    expect(c.page.locator(".turn-usage")).to_contain_text("$")
    tool.locator("summary").click()  # the call's input and its result, opened
    expect(tool.locator("pre").first).to_contain_text("green tea")
    box.fill("what do you know about me?")
    c.page.get_by_role("button", name="Send").click()
    expect(c.page.locator(".message.assistant").last).to_contain_text("green tea")
    expect(c.page.locator(".sessions li.current")).to_contain_text("Dashboard")
    c.shot("chat")

    # A second session: created, switched to, deleted.
    c.page.get_by_role("button", name="New session").click()
    c.page.get_by_label("Title (optional)").fill("Planning")
    c.page.get_by_role("button", name="Create").click()
    expect(c.page.locator(".sessions li.current")).to_contain_text("Planning")
    expect(c.page.get_by_text("No messages yet")).to_be_visible()
    c.page.get_by_role("button", name="Delete session Planning").click()
    c.page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(c.page.locator(".sessions li")).to_have_count(1)

    c.page.get_by_role("link", name="What I know about you").click()
    fact = c.page.locator("article.fact", has_text="green tea")
    expect(fact).to_be_visible()
    expect(fact).to_contain_text("chat")  # its source
    c.shot("facts")
    fact.get_by_role("button", name="Archive").click()
    c.page.get_by_label("Reason").select_option("user_corrected")
    c.page.get_by_role("dialog").get_by_role("button", name="Archive").click()
    expect(c.page.locator("article.fact", has_text="green tea")).to_have_count(0)
    c.page.get_by_label("Show archived").check()
    archived = c.page.locator("article.fact", has_text="green tea")
    expect(archived).to_contain_text("archived: user_corrected")
    archived.get_by_role("button", name="Restore").click()
    expect(c.page.locator("article.fact", has_text="green tea").get_by_role("button", name="Archive")).to_be_visible()
    facts = c.api("GET", "/api/me/facts")["items"]
    assert [f["archivedAt"] for f in facts if "green tea" in f["fact"]] == [None]
    no_page_errors(c)


def card_run(c, stack) -> tuple[dict, dict]:
    """A scheduled agent with a card type, fired once: the agent and its finished heartbeat."""
    agent = c.api(
        "POST",
        "/api/agents",
        {"name": "Trader", "schedule": "rate(1 minute)", "defaultPrompt": "Check BTC.", "cardType": "trade-decision"},
    )
    stack.fire_schedules(datetime.now(UTC) + timedelta(minutes=2))
    runs = c.api("GET", f"/api/agents/{agent['id']}/runs")["items"]
    heartbeat = next(r for r in runs if r["kind"] == "heartbeat")
    return agent, c.wait_run(heartbeat["id"])


def test_heartbeat_card_re_examined_then_resolved(console, stack):
    c = console("heartbeat")
    c.sign_in("dana")
    agent, heartbeat = card_run(c, stack)

    c.page.goto(f"/#/agents/{agent['id']}/runs")
    row = c.page.locator("tr", has_text="heartbeat")
    expect(row).to_contain_text("succeeded")
    expect(row).to_contain_text("trade-decision")
    c.shot("runs")
    row.get_by_role("link").first.click()
    card = c.page.locator(".decision-card")
    expect(card).to_contain_text("Card: trade-decision")
    expect(card).to_contain_text("decision")
    expect(c.page.get_by_text("Not re-examined yet.")).to_be_visible()
    c.page.get_by_role("button", name="Re-examine").click()
    # The child runs in the background; the page follows it and the chart gets its point.
    expect(c.page.locator("svg.chart circle.point")).to_have_count(1, timeout=60_000)
    expect(c.page.locator(".reexaminations tbody tr")).to_have_count(1)
    c.shot("run-detail")
    c.page.get_by_role("button", name="Resolve").click()
    expect(c.page.get_by_role("button", name="Re-examine")).to_have_count(0)  # hidden, with a note saying why
    expect(c.page.locator(".re-examine-note")).to_be_visible()
    expect(c.page.locator("dl.facts").first).to_contain_text("resolved")
    assert c.api("GET", f"/api/runs/{heartbeat['id']}")["resolutionStatus"] == "resolved"
    no_page_errors(c)


def test_active_memory_warning_after_21_runs_and_reset(console):
    c = console("active-memory")
    c.sign_in("erin")
    agent = c.api("POST", "/api/agents", {"name": "Watcher", "activeMemory": True, "defaultPrompt": "Look around."})
    for _ in range(21):
        started = c.api("POST", f"/api/agents/{agent['id']}/runs", {})
        c.wait_run(started["runId"])
    c.page.goto("/#/agents")
    expect(c.page.locator(".agent-card .badge-warn")).to_contain_text("21 runs")  # the amber pill
    c.page.get_by_role("link", name="Watcher").click()
    panel = c.page.locator(".active-memory")
    expect(panel.locator(".runs-since-reset")).to_have_text("21")
    expect(panel.get_by_role("alert")).to_be_visible()
    expect(panel).to_contain_text("Carrying context")
    c.shot("active-memory")
    panel.get_by_role("button", name="Reset memory").click()
    expect(panel.locator(".runs-since-reset")).to_have_text("0")
    expect(panel.get_by_role("alert")).to_have_count(0)
    expect(panel).to_contain_text("Fresh")
    no_page_errors(c)


def test_council_run_memory_by_namespace(console):
    c = console("council")
    c.sign_in("fay")
    one = c.api("POST", "/api/agents", {"name": "Macro", "persona": "You study macro."})
    two = c.api("POST", "/api/agents", {"name": "Flows", "persona": "You study flows."})
    lead = c.api("POST", "/api/agents", {"name": "Director", "defaultPrompt": "Decide.", "team": [one["id"], two["id"]]})
    c.page.goto(f"/#/agents/{lead['id']}/runs")
    c.page.get_by_label("Inputs (optional JSON object, stored as input:<name>)").fill('{"ticker": "ACME"}')
    c.page.get_by_role("button", name="Run now").click()
    expect(c.page.locator(".run-status")).to_contain_text("succeeded", timeout=60_000)  # followed until it ends
    memory = c.page.locator(".run-memory")
    expect(memory).to_contain_text("Council run memory")
    expect(memory.locator('[data-namespace="input"]')).to_contain_text("input:ticker")
    tasks = memory.locator('[data-namespace="task"] details.memory-entry')
    expect(tasks).to_have_count(2)
    value = tasks.first.locator("pre.memory-value")
    assert value.text_content() == ""  # sizes first: the value is not in the page until opened
    tasks.first.locator("summary").click()
    expect(value).not_to_be_empty()
    c.shot("council-memory")
    no_page_errors(c)


def test_api_errors_appear_in_the_page_next_to_the_field(console):
    c = console("errors")
    c.sign_in("gus")
    c.page.get_by_role("link", name="New agent").click()
    c.page.get_by_label("Name").fill("Scheduled")
    c.page.get_by_label("Schedule").fill("rate(5 minutes)")  # without a default prompt
    c.page.get_by_role("button", name="Create agent").click()
    prompt_slot = c.page.locator(".field", has=c.page.get_by_label("Default prompt")).locator(".field-error")
    expect(prompt_slot).to_have_attribute("data-code", "missing_default_prompt")  # at the field the API names
    c.page.get_by_label("Default prompt").fill("Check in.")
    c.page.get_by_label("Schedule").fill("cron(99 99 * * ? *)")  # the scheduler refuses it
    c.page.get_by_role("button", name="Create agent").click()
    slot = c.page.locator(".field", has=c.page.get_by_label("Schedule")).locator(".field-error")
    expect(slot).to_have_attribute("data-code", "invalid_schedule")
    expect(prompt_slot).to_be_empty()
    c.shot("api-error")
    assert c.api("GET", "/api/agents")["items"] == []  # nothing half-written
    c.page.goto("/#/runs/run_doesnotexist")
    expect(c.page.get_by_role("alert")).to_contain_text("Not found")
    no_page_errors(c)


def test_memory_page_manual_rows_pin_and_filter(console):
    c = console("memory")
    c.sign_in("hana")
    agent = c.api("POST", "/api/agents", {"name": "Keeper", "agentMemory": True})
    c.page.goto(f"/#/memory/agent/{agent['id']}")
    expect(c.page.get_by_text("0 shown")).to_be_visible()
    c.page.get_by_label("Key").fill("deploy-day")
    c.page.get_by_label("Value").fill("We deploy on Thursdays")
    c.page.get_by_label("Importance").fill("7")
    c.page.get_by_role("button", name="Add memory").click()
    row = c.page.locator("tr", has_text="deploy-day")
    expect(row).to_contain_text("manual")
    expect(row).to_contain_text("7")
    row.get_by_role("button", name="Pin").click()
    expect(c.page.locator("tr", has_text="deploy-day")).to_contain_text("pinned")
    c.page.get_by_label("Key").fill("lunch")
    c.page.get_by_label("Value").fill("Lunch is at noon")
    c.page.get_by_role("button", name="Add memory").click()
    expect(c.page.locator(".memory-table tbody tr")).to_have_count(2)
    c.page.get_by_label("Search").fill("thursday")
    expect(c.page.locator(".memory-table tbody tr")).to_have_count(1)
    c.page.get_by_label("Search").fill("")
    c.page.locator("tr", has_text="lunch").get_by_role("button", name="Edit").click()
    c.page.get_by_role("dialog").get_by_label("Value").fill("Lunch is at one")
    c.page.get_by_role("dialog").get_by_role("button", name="Save").click()
    expect(c.page.locator("tr", has_text="lunch")).to_contain_text("Lunch is at one")
    c.shot("memory")
    c.page.locator("tr", has_text="lunch").get_by_role("button", name="Delete").click()
    expect(c.page.get_by_role("dialog")).to_be_visible()
    c.page.keyboard.press("Escape")  # Escape closes the dialog: nothing deleted
    expect(c.page.locator(".memory-table tbody tr")).to_have_count(2)
    no_page_errors(c)


def test_usage_chart_and_phone_width(console):
    c = console("usage")
    c.sign_in("ivan")
    agent = c.api("POST", "/api/agents", {"name": "Talker"})
    c.api("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": "hello there"})
    c.page.goto("/#/usage")
    bar = c.page.locator("svg.chart rect.bar.turns").first
    expect(bar).to_be_visible()  # tokens per day: the offline model costs nothing
    assert float(bar.get_attribute("height")) > 0
    expect(c.page.locator("table").first).to_contain_text("Talker")
    c.shot("usage")

    phone = console("phone", width=390, height=844)
    phone.sign_in("ivan")
    expect(phone.page.get_by_role("link", name="Talker")).to_be_visible()
    phone.shot("phone-agents")
    phone.page.goto(f"/#/agents/{agent['id']}/chat")
    expect(phone.page.locator(".message.user")).to_contain_text("hello there")
    phone.shot("phone-chat")
    # Nothing wider than the screen: no sideways scrolling.
    assert phone.page.evaluate("document.scrollingElement.scrollWidth") <= 390
    no_page_errors(c)
    no_page_errors(phone)


def test_a_page_that_loads_late_does_not_replace_the_page_navigated_to(console):
    c = console("late-page")
    c.sign_in("late-page")
    held: list = []
    # The agent form waits for three lists: hold one back until the person has moved on.
    c.page.route("**/api/card-types*", lambda route: held.append(route))
    c.page.get_by_role("link", name="New agent").click()
    for _ in range(400):  # the page's event loop runs while the test waits
        if held:
            break
        c.page.wait_for_timeout(25)
    assert held, "the form asked for no card types"
    c.page.get_by_role("link", name="Agents", exact=True).click()
    expect(c.page.get_by_text("No agents yet")).to_be_visible()
    for route in held:
        route.continue_()
    c.page.unroute("**/api/card-types*")
    c.page.wait_for_load_state("networkidle")
    # the form's late data went nowhere: still the agents page, and its link works
    expect(c.page.get_by_role("heading", name="Agents")).to_be_visible()
    expect(c.page.get_by_label("Persona")).to_have_count(0)
    c.page.get_by_role("link", name="New agent").click()
    expect(c.page.get_by_label("Persona")).to_be_visible()
    no_page_errors(c)


def test_chat_shows_the_trimmed_messages_with_their_summary_and_searches_the_archive(console):
    c = console("trim")
    c.sign_in("trim-user")
    agent = c.api("POST", "/api/agents", {"name": "Keeper", "persona": "You help."})
    path = f"/api/agents/{agent['id']}/sessions/dashboard"
    # Past the cap (50 messages): the offline model answers each message with one reply.
    for i in range(27):
        c.api("POST", f"{path}/messages", {"message": f"Entry {i}: the boiler code is B{i}. More words follow."})
    deadline = datetime.now(UTC) + timedelta(seconds=60)
    session = c.api("GET", path)
    while not session["summary"] and datetime.now(UTC) < deadline:  # the summary arrives off the reply path
        session = c.api("GET", path)
    assert session["trimmedCount"] > 0 and session["summary"], session["trimmedCount"]
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    marker = c.page.locator("details.trim-marker")
    expect(marker).to_contain_text(f"{session['trimmedCount']} earlier messages")
    expect(marker).to_contain_text("offline summariser")
    expect(marker).to_contain_text("User: Entry 0: the boiler code is B0.")
    c.page.locator(".transcript").evaluate("el => { el.scrollTop = 0; }")
    c.shot("chat-trimmed", full_page=False)
    c.page.get_by_label("Search earlier conversations").fill("boiler code B0")
    c.page.get_by_role("button", name="Search", exact=True).click()
    hit = c.page.locator(".archive-hit").first
    expect(hit).to_contain_text("Entry 0: the boiler code is B0.")
    expect(hit.get_by_role("link", name="Dashboard")).to_be_visible()
    c.shot("chat-archive-search", full_page=False)
    no_page_errors(c)
