"""An OAuth tool server in the console (TL9): a person adds it with "Sign in with OAuth", presses
Connect, the server's sign-in opens in a popup (a real authorization server, oidc-provider, signs
in and consents by itself) and comes back to Engram's callback, which tells the console and
closes; the tools are then listed. Headless Chromium, the local stack, a real MCP server that
accepts only tokens issued for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.test_console import no_page_errors
from tests.oauth.fixture import AuthorizationServer, free_port, protected_mcp_server


@pytest.fixture(scope="module")
def protected() -> Iterator[Any]:
    port = free_port()
    issuer = AuthorizationServer.start(resources=[{"resource": f"http://127.0.0.1:{port}/mcp", "scope": "tools", "ttl": 600}])
    mcp = protected_mcp_server(issuer.issuer, port)
    yield mcp
    mcp.stop()
    issuer.stop()


def test_a_person_connects_an_oauth_tool_server_in_a_popup(console, protected):
    c = console()
    c.sign_in("oauth-user")
    page = c.page
    page.get_by_role("link", name="Tools").click()
    page.get_by_role("heading", name="Tool servers").wait_for()

    page.get_by_label("Name").fill("tracker")
    page.get_by_label("URL").fill(protected.url)
    page.get_by_label("Sign in with OAuth").check()
    expect(page.get_by_label("Auth value")).to_be_disabled()
    page.get_by_role("button", name="Add server").click()
    expect(page.get_by_text("tracker: needs authorization")).to_be_visible()
    expect(page.get_by_text("OAuth: needs authorization")).to_be_visible()
    c.shot("tools-oauth-needs-authorization")

    with page.expect_popup() as opened:
        page.locator(".test-result").get_by_role("button", name="Connect").click()
    popup = opened.value
    # Signed in and consented at the server, back at Engram's callback, which told the console
    # and closed the popup.
    expect(page.get_by_text("tracker: 2 tool(s)")).to_be_visible()
    if not popup.is_closed():
        popup.wait_for_event("close")
    expect(page.get_by_text("OAuth: connected")).to_be_visible()
    expect(page.get_by_text("mcp__tracker__lookup_price")).to_be_visible()
    c.shot("tools-oauth-connected")
    no_page_errors(c)
