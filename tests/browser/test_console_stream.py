"""The chat page streams (issue 23): a turn's text and tool blocks appear as they happen over the
local WebSocket API, a second tab sees the turn and a run on the shared session arrive, and
without a WebSocket the page falls back to HTTP."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.test_console import no_page_errors


def open_chat(c, agent_id: str) -> None:
    c.page.goto(f"/#/agents/{agent_id}/chat")
    c.page.get_by_label("Message").wait_for()


def test_a_turn_streams_and_a_second_tab_sees_it_and_a_run_arrive(console):
    first = console("stream-first")
    first.sign_in("streamer")
    agent = first.api("POST", "/api/agents", {"name": "Live", "persona": "You help.", "activeMemory": True})
    open_chat(first, agent["id"])
    expect(first.page.locator(".live-badge")).to_have_text("Live")
    second = console("stream-second")
    second.sign_in("streamer")
    open_chat(second, agent["id"])
    expect(second.page.locator(".live-badge")).to_have_text("Live")

    box = first.page.get_by_label("Message")
    box.fill("tell me a story " + "about the sea " * 30)
    box.press("Enter")
    expect(first.page.locator(".message.assistant").last).to_contain_text("tell me a story")
    expect(first.page.locator(".turn-usage")).to_contain_text("Last turn:")
    # the other tab: the turn arrived as it ran, then the transcript holds it
    expect(second.page.locator(".message.assistant").last).to_contain_text("about the sea")
    expect(second.page.locator(".message.user").last).to_contain_text("tell me a story")
    first.shot("stream-first-tab")

    run = first.api("POST", f"/api/agents/{agent['id']}/runs", {"prompt": "check in on the shared session"})
    first.wait_run(run["runId"])
    for tab in (first, second):
        expect(tab.page.locator(".message.user").last).to_contain_text("check in on the shared session")
    second.shot("stream-second-tab")
    no_page_errors(first)
    no_page_errors(second)


def test_without_a_websocket_the_chat_works_over_http(console):
    c = console("stream-fallback")
    c.context.add_init_script("window.WebSocket = undefined;")
    c.sign_in("nosocket")
    agent = c.api("POST", "/api/agents", {"name": "Plain", "persona": "You help."})
    open_chat(c, agent["id"])
    box = c.page.get_by_label("Message")
    box.fill("hello over http")
    box.press("Enter")
    expect(c.page.locator(".message.assistant").last).to_contain_text("hello over http")
    expect(c.page.locator(".live-badge")).to_have_text("HTTP")
    c.shot("stream-fallback")
