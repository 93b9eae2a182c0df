"""The console: queued turns followed to the end, long lists paged, the data export downloaded,
and the account deleted only after the typed confirmation."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.faults import REFUSED, inject


def test_a_queued_turn_is_shown_until_its_run_finishes(console):
    c = console("async-turn")
    c.sign_in("jade")
    agent = c.api("POST", "/api/agents", {"name": "Later"})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    c.page.get_by_label("Queue it (async)").check()
    c.page.get_by_label("Message").fill("hello from the queue")
    c.page.get_by_label("Message").press("Enter")
    expect(c.page.locator(".queued")).to_have_count(1)  # the run, queued or running
    expect(c.page.locator(".queued")).to_have_count(0)  # gone once it finished...
    expect(c.page.locator(".message.assistant")).to_contain_text("hello from the queue")  # ...with its reply
    runs = c.api("GET", f"/api/agents/{agent['id']}/runs")["items"]
    assert [(r["trigger"], r["status"]) for r in runs] == [("async", "succeeded")]


def test_a_queued_turn_is_shown_once_when_the_runs_listing_sees_it_before_the_post_answers(console):
    """The page lists the session's queued runs when it opens and shows the one its own POST
    queued: when the listing lands between the POST's commit and its answer, both name the same
    run. Held here in that order (the race CI once hit), the run is still shown once."""
    c = console("async-turn-race")
    c.sign_in("jade")
    agent = c.api("POST", "/api/agents", {"name": "Later"})
    listings: list[Any] = []
    posts: list[Any] = []
    c.page.route("**/runs?limit=20", lambda route: listings.append(route))
    c.page.route("**/messages?async=true", lambda route: posts.append(route))
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    _wait_for(c, listings)
    c.page.get_by_label("Queue it (async)").check()
    c.page.get_by_label("Message").fill("hello from the queue")
    c.page.get_by_label("Message").press("Enter")
    _wait_for(c, posts)
    posted = posts[0].fetch()  # the run is committed; its answer is held back
    listing = listings[0].fetch()
    page = listing.json()["data"]  # the API's envelope: {"success": true, "data": ...}
    assert [r["id"] for r in page["items"]] == [posted.json()["data"]["runId"]]
    # the listing as it was read while the run waited in the queue (the worker may be quicker here)
    as_read = {"success": True, "data": {**page, "items": [{**page["items"][0], "status": "queued"}]}}
    c.page.evaluate(COUNT_QUEUED_VIEWS)
    listings[0].fulfill(response=listing, json=as_read)
    posts[0].fulfill(response=posted)
    expect(c.page.get_by_label("Message")).to_have_value("")  # the POST's answer was read
    expect(c.page.locator(".message.assistant")).to_contain_text("hello from the queue")
    expect(c.page.locator(".queued")).to_have_count(0)
    assert c.page.evaluate("window.mostQueuedViews") == 1  # one view of the run, never two


def test_a_queued_turn_whose_end_never_reaches_the_socket_is_shown_once_and_ends(console):
    """The socket's events are best-effort: a queued turn the page watches live (its reply streams
    in below the transcript) is also followed over HTTP. When the push of its turn.completed is
    lost, the follow ends it: the reply shows once, in the transcript, and no live view is left."""
    c = console("async-turn-lost-end")
    c.sign_in("jade")
    agent = c.api("POST", "/api/agents", {"name": "Later"})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    expect(c.page.locator(".live-badge")).to_have_text("Live")  # the page watches the session
    with inject() as faults:
        faults.add(
            "apigatewaymanagementapi",
            "PostToConnection",
            REFUSED,
            times=10,
            when=lambda params: b'"turn.completed"' in params["Data"],
        )
        c.page.get_by_label("Queue it (async)").check()
        c.page.get_by_label("Message").fill("hello from the queue")
        c.page.get_by_label("Message").press("Enter")
        expect(c.page.get_by_label("Message")).to_have_value("")  # queued: the run is followed from here
        expect(c.page.locator(".queued")).to_have_count(0)  # the follow saw it end...
        expect(c.page.locator(".live-turn")).to_have_count(0)  # ...and no live view is left turning
        expect(c.page.locator(".message.assistant")).to_contain_text("hello from the queue")  # the reply, once
    assert ("apigatewaymanagementapi", "PostToConnection", "refused") in faults.injected  # its end was lost
    assert not c.errors


def _lose_turn_ends(faults: Any, times: int) -> None:
    """The socket's turn.completed pushes refused (events are best-effort): the page never hears them."""
    faults.add(
        "apigatewaymanagementapi",
        "PostToConnection",
        REFUSED,
        times=times,
        when=lambda params: b'"turn.completed"' in params["Data"],
    )


def test_a_manual_run_whose_end_never_reaches_the_socket_ends_on_the_next_transcript_load(console):
    """A run on the shared session (a heartbeat, a manual run, a webhook's turn) reaches the page
    only over the socket: nothing follows it over HTTP. Its turn.completed lost, the live view has
    no event for 10 s; the page then reads the session once, sees the run committed (`lastRunId`),
    and loads the transcript: the reply shows once, and no spinner is left turning."""
    c = console("manual-run-lost-end")
    c.sign_in("jade")
    agent = c.api("POST", "/api/agents", {"name": "Checker", "defaultPrompt": "Check in.", "activeMemory": True})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    expect(c.page.locator(".live-badge")).to_have_text("Live")
    c.page.evaluate(COUNT_REPLIES, "look around the garden")
    with inject() as faults:
        _lose_turn_ends(faults, 10)
        run = c.api("POST", f"/api/agents/{agent['id']}/runs", {"prompt": "look around the garden"})
        c.wait_run(run["runId"])
        expect(c.page.locator(".live-turn")).to_have_count(0)  # ended by the page's check, not by the socket
    assert ("apigatewaymanagementapi", "PostToConnection", "refused") in faults.injected  # its end was lost
    expect(c.page.locator(".message.user.arrived")).to_contain_text("look around the garden")
    expect(c.page.locator(".message.assistant")).to_contain_text("look around the garden")  # the reply, once
    expect(c.page.locator(".spinner")).to_have_count(0)
    assert c.page.evaluate("window.mostReplies") == 1  # never two views of the reply, even for a moment
    c.shot("manual-run-lost-end")
    assert not c.errors


def test_a_run_whose_end_was_lost_goes_when_a_later_turn_reloads_the_transcript(console):
    """A manual run's turn.completed is lost; the person then chats. Their turn's end reloads the
    transcript, whose `lastRunId` is their (later) turn: the run before it is asked over HTTP,
    seen ended, and its live view goes in the same load. Each reply shows once."""
    c = console("lost-end-then-chat")
    c.sign_in("jade")
    agent = c.api("POST", "/api/agents", {"name": "Chatter", "defaultPrompt": "Check in.", "activeMemory": True})
    # said first: the offline model quotes a session's first message in every later reply
    c.api("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": "hello there"})
    c.page.goto(f"/#/agents/{agent['id']}/chat")
    expect(c.page.locator(".live-badge")).to_have_text("Live")
    c.page.evaluate(COUNT_REPLIES, "water the roses")
    with inject() as faults:
        _lose_turn_ends(faults, 1)  # the run's end only: the chat turn's arrives
        run = c.api("POST", f"/api/agents/{agent['id']}/runs", {"prompt": "water the roses"})
        c.wait_run(run["runId"])
        expect(c.page.locator(".live-turn .message.assistant")).to_contain_text("water the roses")
        c.page.get_by_label("Message").fill("did you water them?")
        c.page.get_by_label("Message").press("Enter")
        expect(c.page.locator(".turn-usage")).to_contain_text("Last turn:")  # the chat turn's end arrived
    assert ("apigatewaymanagementapi", "PostToConnection", "refused") in faults.injected
    expect(c.page.locator(".live-turn")).to_have_count(0)
    expect(c.page.locator(".message.assistant").filter(has_text="water the roses")).to_have_count(1)
    expect(c.page.locator(".message.assistant").filter(has_text="did you water them?")).to_have_count(1)
    assert c.page.evaluate("window.mostReplies") == 1
    c.shot("lost-end-then-chat")
    assert not c.errors


# Counts, at every change of the page, how many views of the reply to `prompt` it shows at once
# (the transcript's and a live view's would be two).
COUNT_REPLIES = """(prompt) => {
  window.mostReplies = 0;
  new MutationObserver(() => {
    const views = [...document.querySelectorAll('.message.assistant')].filter((m) => m.textContent.includes(prompt));
    window.mostReplies = Math.max(window.mostReplies, views.length);
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
}"""

# Counts, at every change of the page, how many queued-run views it shows at once.
COUNT_QUEUED_VIEWS = """() => {
  window.mostQueuedViews = 0;
  new MutationObserver(() => {
    window.mostQueuedViews = Math.max(window.mostQueuedViews, document.querySelectorAll('.queued').length);
  }).observe(document.body, { childList: true, subtree: true });
}"""


def _wait_for(c: Any, held: list[Any]) -> None:
    for _ in range(400):
        if held:
            return
        c.page.wait_for_timeout(50)
    raise AssertionError("the page never sent the request the test holds")


def test_long_lists_page_with_load_more(console):
    c = console("paging")
    c.sign_in("kim")
    for i in range(52):
        c.api("POST", "/api/agents", {"name": f"Agent {i:02d}"})
    c.page.goto("/#/agents")
    expect(c.page.locator(".agent-card")).to_have_count(50)  # the API's default page
    c.page.get_by_role("button", name="Load more").click()
    expect(c.page.locator(".agent-card")).to_have_count(52)
    expect(c.page.get_by_role("button", name="Load more")).to_have_count(0)


def test_export_download_and_account_deletion_with_typed_confirmation(console):
    c = console("account")
    c.sign_in("lee")
    c.api("POST", "/api/me/facts", {"fact": "I live in Lisbon"})
    c.page.goto("/#/facts")
    c.page.get_by_role("button", name="Export my data").click()
    download = c.page.locator("#export-download")
    expect(download).to_be_visible()
    with c.page.expect_download() as event:
        download.click()
    lines = open(event.value.path(), encoding="utf-8").read().splitlines()  # noqa: SIM115
    assert '"type": "fact"' in "\n".join(lines) or '"type":"fact"' in "\n".join(lines)
    assert "Lisbon" in "\n".join(lines)
    c.shot("account")

    c.page.get_by_role("button", name="Delete my account").click()
    dialog = c.page.get_by_role("dialog")
    expect(dialog.get_by_role("button", name="Delete everything")).to_be_disabled()  # looks it, and says why
    expect(dialog.get_by_role("status")).to_have_text("Type delete to enable Delete everything.")
    dialog.get_by_label("Type delete to confirm").fill("yes")
    expect(dialog.get_by_role("button", name="Delete everything")).to_be_disabled()
    expect(dialog.get_by_role("status")).to_contain_text("That is not “delete”")
    c.shot("account-delete-confirm")
    assert len(c.api("GET", "/api/me/facts")["items"]) == 1
    dialog.get_by_label("Type delete to confirm").fill("delete")
    dialog.get_by_role("button", name="Delete everything").click()
    expect(c.page.get_by_label("Dev user")).to_be_visible()  # signed out
    assert c.api("GET", "/api/me/facts")["items"] == []
