"""The chat page as a person lives in it (issue 26, the chat's items): on a phone the reply scrolls
into view after Send; a manual run's prompt in the shared session says so instead of "You"; a
failed send leaves no usage of the turn before it on screen; an untitled session is named by when
it began, never by its id. Headless Chromium, offline model."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.test_console import no_page_errors


def test_on_a_phone_the_reply_scrolls_into_view_after_send(console):
    c = console(width=390, height=844)
    c.sign_in("phone-chatter")
    agent = c.api("POST", "/api/agents", {"name": "Pocket"})
    for i in range(6):
        c.api("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": f"note {i}: " + "words " * 30})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    c.page.get_by_label("Message").fill("and the last one")
    c.page.get_by_role("button", name="Send").click()
    reply = c.page.locator(".message.assistant").last
    expect(reply).to_contain_text("and the last one")
    expect(reply).to_be_in_viewport()
    c.shot("phone-chat-after-send", full_page=False)
    no_page_errors(c)


def test_a_manual_runs_prompt_is_labelled_not_you(console):
    c = console()
    c.sign_in("am-labeller")
    agent = c.api("POST", "/api/agents", {"name": "Watcher", "activeMemory": True, "defaultPrompt": "Check the queue depth."})
    run = c.api("POST", f"/api/agents/{agent['id']}/runs", {})
    assert c.wait_run(run["runId"])["status"] == "succeeded"
    c.api("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": "what did the run find?"})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    roles = c.page.locator(".message.user .role")
    expect(roles).to_have_count(2)
    expect(roles.nth(0)).to_have_text("Manual run")
    expect(roles.nth(1)).to_have_text("You")
    c.shot("chat-manual-run-label")
    no_page_errors(c)


def test_a_failed_send_leaves_no_usage_of_the_turn_before(console):
    c = console()
    c.sign_in("failed-sender")
    agent = c.api("POST", "/api/agents", {"name": "Strict"})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    c.page.get_by_label("Message").fill("hello")
    c.page.get_by_role("button", name="Send").click()
    expect(c.page.locator(".turn-usage")).to_contain_text("Last turn")
    c.page.get_by_label("Message").fill("x" * 33_000)  # over MESSAGE_MAX_CHARS: refused
    c.page.get_by_role("button", name="Send").click()
    expect(c.page.locator(".chat-error, .error").first).to_be_visible()
    expect(c.page.locator(".turn-usage")).to_have_text("")
    c.shot("chat-failed-send")


def test_an_untitled_session_is_named_by_when_it_began(console):
    c = console()
    c.sign_in("session-namer")
    agent = c.api("POST", "/api/agents", {"name": "Keeper"})
    session = c.api("POST", f"/api/agents/{agent['id']}/sessions", {})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    titles = c.page.locator(".sessions li .title")
    expect(titles).to_have_count(2)
    expect(titles.nth(1)).to_contain_text("Untitled ·")
    expect(c.page.locator(".sessions")).not_to_contain_text(session["id"])
    no_page_errors(c)
