"""The console as a person lives in it (issue 26): what a new user tripped over, each checked in
headless Chromium against the local stack (offline model)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.browser.test_console import card_run, no_page_errors

LONG_NAME = "N" * 100  # a name without a space to break at


def test_a_runs_duration_and_finish_time_stay_when_it_is_acted_on_later(console, stack):
    c = console("run-times")
    c.sign_in("run-times")
    agent, run = card_run(c, stack)
    assert run["startedAt"] and run["finishedAt"] and run["startedAt"] <= run["finishedAt"]
    c.page.goto(f"/#/runs/{run['id']}")
    facts = c.page.locator("dl.facts").first
    expect(facts).to_contain_text("Finished")
    duration = facts.locator("dt:text-is('Duration') + dd").text_content()
    finished = facts.locator("dt:text-is('Finished') + dd").text_content()
    c.page.get_by_role("button", name="Re-examine").click()
    expect(c.page.locator(".reexaminations tbody tr")).to_have_count(1, timeout=60_000)
    # The queued notice goes once the re-examination it announced has finished.
    expect(c.page.get_by_text("queued; this page follows it")).to_have_count(0)
    c.page.wait_for_timeout(1100)  # a second later: a duration measured to updatedAt would grow
    c.page.get_by_role("button", name="Resolve").click()
    expect(facts).to_contain_text("resolved")
    # A resolved until_resolved card: no Re-examine button, and a note saying why.
    expect(c.page.get_by_role("button", name="Re-examine")).to_have_count(0)
    expect(c.page.locator(".re-examine-note")).to_contain_text("resolved")
    assert facts.locator("dt:text-is('Duration') + dd").text_content() == duration
    assert facts.locator("dt:text-is('Finished') + dd").text_content() == finished
    after = c.api("GET", f"/api/runs/{run['id']}")
    assert (after["startedAt"], after["finishedAt"]) == (run["startedAt"], run["finishedAt"])
    assert after["updatedAt"] > run["finishedAt"]
    # The run page names the agent; the runs list shows the decision and the same duration.
    expect(facts.locator("dt:text-is('Agent') + dd")).to_have_text("Trader")
    c.page.goto(f"/#/agents/{agent['id']}/runs")
    row = c.page.locator("tr", has_text="heartbeat")
    expect(row.locator("td[data-label=Decision]")).to_contain_text("WAIT")
    expect(row.locator("td[data-label=Duration]")).to_have_text(duration)
    c.shot("runs-times")
    no_page_errors(c)


def test_phone_width_run_page_does_not_scroll_sideways_and_the_nav_shows_usage(console, stack):
    c = console("phone-run", width=390, height=844)
    c.sign_in("phone-run")
    _, run = card_run(c, stack)
    c.page.goto(f"/#/runs/{run['id']}")
    expect(c.page.get_by_role("heading", name=f"Run {run['id']}")).to_be_visible()
    expect(c.page.locator(".decision-card")).to_be_visible()
    assert c.page.evaluate("document.scrollingElement.scrollWidth") <= 390
    usage = c.page.get_by_role("link", name="Usage")
    expect(usage).to_be_in_viewport()  # every nav link on screen, none hidden past the edge
    box = usage.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390
    c.shot("phone-run")
    no_page_errors(c)


def test_a_long_name_without_spaces_stays_inside_cards_and_the_agent_page(console):
    c = console("long-name")
    c.sign_in("long-name")
    agent = c.api("POST", "/api/agents", {"name": LONG_NAME, "persona": "P" * 140})
    c.api("POST", "/api/agents", {"name": "Neighbour"})
    c.page.goto("/#/agents")
    card = c.page.locator(".agent-card", has_text="NNNN")
    expect(card).to_be_visible()
    card_box = card.bounding_box()
    title_width = card.locator("h2").evaluate("el => el.scrollWidth")
    assert title_width <= card.locator("h2").evaluate("el => el.clientWidth")
    link_box = card.get_by_role("link", name=LONG_NAME).bounding_box()
    assert card_box and link_box and link_box["x"] + link_box["width"] <= card_box["x"] + card_box["width"]
    c.shot("long-name-cards")
    for width in (1280, 390):
        c.page.set_viewport_size({"width": width, "height": 800})
        c.page.goto(f"/#/agents/{agent['id']}")
        expect(c.page.get_by_role("heading", name=LONG_NAME)).to_be_visible()
        assert c.page.evaluate("document.scrollingElement.scrollWidth") <= width
    c.shot("long-name-agent")
    no_page_errors(c)


def test_the_agent_page_shows_its_memory_names_and_active_memory_ages(console):
    c = console("agent-page")
    c.sign_in("agent-page")
    ws = c.api("POST", "/api/workspaces", {"name": "Research desk"})
    helper = c.api("POST", "/api/agents", {"name": "Helper"})
    agent = c.api(
        "POST",
        "/api/agents",
        {
            "name": "Keeper",
            "agentMemory": True,
            "activeMemory": True,
            "workspaceId": ws["id"],
            "team": [helper["id"]],
            "defaultPrompt": "Look.",
        },
    )
    base = f"/api/agents/{agent['id']}/memories"
    c.api("POST", base, {"key": "deploy-day", "value": "We deploy on Thursdays"})
    c.wait_run(c.api("POST", f"/api/agents/{agent['id']}/runs", {})["runId"])
    c.page.goto(f"/#/agents/{agent['id']}")
    settings = c.page.locator("dl.facts").first
    expect(settings.locator("dt:text-is('Workspace') + dd")).to_have_text("Research desk")
    expect(settings.locator("dt:text-is('Team') + dd")).to_have_text("Helper")
    memory = c.page.locator(".agent-memory")
    expect(memory.locator(".memory-table tbody tr", has_text="deploy-day")).to_contain_text("We deploy on Thursdays")
    panel = c.page.locator(".active-memory")
    expect(panel.locator(".runs-since-reset")).to_have_text("1")
    expect(panel).to_contain_text("chat turns are not counted")
    expect(panel.locator(".session-age")).to_contain_text("carrying context since")
    expect(panel.locator(".last-active")).to_contain_text("ago")
    c.shot("agent-page-memory")
    am = c.api("GET", f"/api/agents/{agent['id']}/active-memory")
    assert am["contextStartedAt"] and am["lastActiveAt"] and am["contextStartedAt"] <= am["lastActiveAt"]
    c.api("POST", f"/api/agents/{agent['id']}/active-memory/reset")
    am = c.api("GET", f"/api/agents/{agent['id']}/active-memory")
    assert (am["sessionAgeSeconds"], am["contextStartedAt"]) == (None, None) and am["lastActiveAt"]
    no_page_errors(c)


def test_memory_source_filter_has_chat_and_manual_keeps_chat_rows(console):
    c = console("memory-chat")
    c.sign_in("memory-chat")
    ws = c.api("POST", "/api/workspaces", {"name": "Office"})
    agent = c.api("POST", "/api/agents", {"name": "Keeper", "workspaceId": ws["id"]})
    c.api("POST", f"/api/workspaces/{ws['id']}/memories", {"key": "by-hand", "value": "Typed in the console"})
    c.api(
        "POST",
        f"/api/agents/{agent['id']}/sessions/dashboard/messages",
        {"message": "note for the workspace that the office opens at nine"},
    )
    rows = c.api("GET", f"/api/workspaces/{ws['id']}/memories")["items"]
    assert sorted(r["source"] for r in rows) == ["chat", "manual"], rows
    c.page.goto(f"/#/memory/workspace/{ws['id']}")
    table = c.page.locator(".memory-table tbody tr")
    expect(table).to_have_count(2)
    c.page.get_by_label("Source").select_option("chat")
    expect(table).to_have_count(1)
    expect(table).to_contain_text("office opens at nine")
    c.page.get_by_label("Source").select_option("manual")
    expect(table).to_have_count(2)  # what a person put there: by hand, or by asking in chat
    no_page_errors(c)


def test_new_agent_focus_stale_messages_and_field_errors(console):
    c = console("stale")
    c.sign_in("stale")
    c.page.get_by_role("link", name="New agent").click()
    expect(c.page.get_by_label("Name")).to_be_focused()
    posts: list[str] = []
    c.page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    c.page.get_by_role("button", name="Create agent").click()  # no name: said at once, nothing sent
    name_slot = c.page.locator(".field", has=c.page.get_by_label("Name")).locator(".field-error")
    expect(name_slot).to_contain_text("name must not be empty")
    assert posts == []
    c.page.get_by_label("Name").fill("Scheduled")
    c.page.get_by_label("Schedule").fill("rate(5 minutes)")  # without a default prompt
    c.page.get_by_role("button", name="Create agent").click()
    slot = c.page.locator(".field", has=c.page.get_by_label("Default prompt")).locator(".field-error")
    expect(slot).not_to_be_empty()
    c.page.get_by_label("Schedule").fill("")  # the cause is gone...
    c.page.get_by_label("Default prompt").fill("x")
    expect(slot).to_be_empty()  # ...and so is the error about it

    c.page.goto("/#/facts")
    c.page.get_by_label("Fact").fill("I like tea")
    c.page.get_by_role("button", name="Add fact").click()
    expect(c.page.get_by_text("Fact saved.")).to_be_visible()
    fact = c.page.locator("article.fact", has_text="I like tea")
    expect(fact.locator(".tags")).to_contain_text("source: profile")  # badges say what they are
    expect(fact.locator(".tags")).to_contain_text("confidence: asserted")
    fact.get_by_role("button", name="Confirm (asserted)").or_(fact.get_by_role("button", name="Mark inferred")).click()
    expect(c.page.get_by_text("Fact saved.")).to_have_count(0)  # a later action: the notice is gone
    no_page_errors(c)


def test_deleting_a_workspace_in_use_names_its_agents_before_asking(console):
    c = console("ws-in-use")
    c.sign_in("ws-in-use")
    ws = c.api("POST", "/api/workspaces", {"name": "Shared"})
    c.api("POST", "/api/agents", {"name": "Scout", "workspaceId": ws["id"]})
    c.page.goto("/#/workspaces")
    c.page.locator("tr", has_text="Shared").get_by_role("button", name="Delete").click()
    dialog = c.page.get_by_role("dialog")
    expect(dialog).to_contain_text("Used by the agent Scout")
    expect(dialog.get_by_role("button", name="Delete")).to_have_count(0)  # nothing to confirm
    c.shot("workspace-in-use")
    dialog.get_by_role("button", name="Close").click()
    c.page.keyboard.press("Escape")
    expect(c.page.locator("tr", has_text="Shared")).to_be_visible()
    no_page_errors(c)


def test_usage_names_sessions_links_them_and_keeps_the_agent_in_the_address(console):
    c = console("usage-names")
    c.sign_in("usage-names")
    talker = c.api("POST", "/api/agents", {"name": "Talker"})
    c.api("POST", "/api/agents", {"name": "Quiet"})
    c.api("POST", f"/api/agents/{talker['id']}/sessions", {"id": "plans", "title": "Holiday plans"})
    c.api("POST", f"/api/agents/{talker['id']}/sessions/plans/messages", {"message": "hello there"})
    c.page.goto("/#/usage")
    sessions = c.page.locator("section", has=c.page.get_by_role("heading", name="Per session"))
    link = sessions.get_by_role("link", name="Holiday plans")
    expect(link).to_be_visible()  # the session's title, not its id, and a link to it
    expect(c.page.locator("svg.chart text.day")).to_have_count(1)  # one day plotted, one day on the axis
    c.page.get_by_label("Agent").select_option(label="Talker")
    expect(c.page).to_have_url(f"{c.url}/#/usage?agent={talker['id']}")
    c.page.reload()
    expect(c.page.get_by_label("Agent")).to_have_value(talker["id"])
    expect(c.page.get_by_role("link", name="Usage")).to_have_attribute("aria-current", "page")
    link = c.page.locator("section", has=c.page.get_by_role("heading", name="Per session")).get_by_role(
        "link", name="Holiday plans"
    )
    expect(link).to_be_visible()
    c.shot("usage-names")
    link.click()
    expect(c.page).to_have_url(f"{c.url}/#/agents/{talker['id']}/chat/plans")
    no_page_errors(c)


def test_usage_names_a_re_examination_run_by_its_kind(console, stack):
    c = console("usage-runs")
    c.sign_in("usage-runs")
    _, run = card_run(c, stack)
    child = c.wait_run(c.api("POST", f"/api/runs/{run['id']}/re-examine")["runId"])
    c.page.goto("/#/usage")
    sessions = c.page.locator("section", has=c.page.get_by_role("heading", name="Per session"))
    link = sessions.get_by_role("link", name=re.compile(r"^re-examination · "))
    expect(link).to_have_attribute("href", f"#/runs/{child['id']}")
    expect(sessions.get_by_role("link", name=re.compile(r"^heartbeat · "))).to_have_attribute("href", f"#/runs/{run['id']}")
    no_page_errors(c)


def test_lists_say_they_are_loading(console):
    c = console("loading")
    c.sign_in("loading")
    agent = c.api("POST", "/api/agents", {"name": "Slow"})
    held: list = []
    c.page.route("**/api/agents/*/runs*", lambda route: held.append(route))
    c.page.goto(f"/#/agents/{agent['id']}/runs")
    expect(c.page.get_by_text("Loading runs…")).to_be_visible()  # the page is there, its list on its way
    c.shot("runs-loading")
    for route in held:
        route.continue_()
    c.page.unroute("**/api/agents/*/runs*")
    expect(c.page.get_by_text("No runs yet.")).to_be_visible()
    expect(c.page.get_by_text("Loading runs…")).to_have_count(0)
    no_page_errors(c)


def test_the_webhook_secret_has_a_copy_button_and_cancel_looks_secondary(console):
    c = console("copy-secret")
    c.sign_in("copy-secret")
    c.context.grant_permissions(["clipboard-read", "clipboard-write"])
    c.page.get_by_role("link", name="New agent").click()
    c.page.get_by_label("Name").fill("Hooked")
    c.page.get_by_role("button", name="Create agent").click()
    dialog = c.page.get_by_role("dialog")
    secret = dialog.locator("code.secret").text_content()
    dialog.get_by_role("button", name="Copy").click()
    expect(dialog.locator(".secret-box").get_by_role("status")).to_contain_text("Copied.")
    assert c.page.evaluate("navigator.clipboard.readText()") == secret
    dialog.get_by_role("button", name="Done").click()
    c.page.get_by_role("button", name="Delete agent").click()
    confirm = c.page.get_by_role("dialog")
    expect(confirm.get_by_role("button", name="Cancel")).to_have_class("secondary")
    expect(confirm.get_by_role("button", name="Delete")).to_have_class("danger")
    no_page_errors(c)
