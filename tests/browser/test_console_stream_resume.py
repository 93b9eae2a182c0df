"""The chat page when its socket drops (ST5): a socket closed right after a send is opened again,
the turn (sent again with its clientTurnId, or resumed) ends on the page with no spinner left; a
message the socket refuses stays in the box."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.test_console import no_page_errors
from tests.browser.test_console_stream import open_chat

# Keeps the page's sockets where the test can reach them (to drop one as a network would).
TRACK_SOCKETS = """
(() => {
  const Real = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = function (...args) { const s = new Real(...args); window.__sockets.push(s); return s; };
  Object.assign(window.WebSocket, { OPEN: Real.OPEN, CLOSED: Real.CLOSED, CONNECTING: Real.CONNECTING, CLOSING: Real.CLOSING });
  window.WebSocket.prototype = Real.prototype;
})();
"""


def test_a_socket_closed_right_after_a_send_reconnects_and_the_turn_ends(console):
    c = console("stream-drop")
    c.context.add_init_script(TRACK_SOCKETS)
    c.sign_in("dropper")
    agent = c.api("POST", "/api/agents", {"name": "Steady", "persona": "You help."})
    open_chat(c, agent["id"])
    expect(c.page.locator(".live-badge")).to_have_text("Live")
    box = c.page.get_by_label("Message")
    box.fill("still there after the drop?")
    box.press("Enter")
    c.page.evaluate("window.__sockets.at(-1).close()")
    expect(c.page.locator(".message.assistant").last).to_contain_text("still there after the drop?")
    expect(c.page.locator(".live-turn")).to_have_count(0)  # no spinner left turning
    expect(c.page.locator(".live-badge")).to_have_text("Live")
    assert c.page.evaluate("window.__sockets.length") >= 2
    runs = c.api("GET", f"/api/agents/{agent['id']}/runs")["items"]
    assert len(runs) == 1  # sent again with its clientTurnId: one run
    c.shot("stream-reconnected")
    no_page_errors(c)


def test_a_message_the_socket_refuses_stays_in_the_box(console):
    c = console("stream-refused")
    c.sign_in("refused")
    agent = c.api("POST", "/api/agents", {"name": "Gone soon", "persona": "You help."})
    open_chat(c, agent["id"])
    expect(c.page.locator(".live-badge")).to_have_text("Live")
    c.api("DELETE", f"/api/agents/{agent['id']}")
    box = c.page.get_by_label("Message")
    box.fill("are you there?")
    box.press("Enter")
    expect(c.page.locator(".chat-error")).to_contain_text("agent not found")
    expect(c.page.locator(".chat-error [data-code='not_found'], .chat-error[data-code='not_found']").first).to_be_attached()
    expect(box).to_have_value("are you there?")
    expect(c.page.locator(".live-turn")).to_have_count(0)
