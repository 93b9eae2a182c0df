"""The console's API keys page (MX2, MX6) and its "Connect" panel (MX4): a key created with a
name, scopes and an expiry is shown once with a Copy button and works; the list shows its last
use; revoking asks first and the key stops at once."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

from playwright.sync_api import expect


def _status_with(url: str, key: str) -> int:
    request = urllib.request.Request(f"{url}/api/agents", headers={"authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code


def test_create_copy_list_and_revoke_a_key(console):
    c = console("api-keys")
    c.sign_in("kim")
    c.page.get_by_role("link", name="API keys").click()
    expect(c.page.get_by_role("heading", name="API keys", exact=True)).to_be_visible()
    expect(c.page.get_by_text("No API keys yet.")).to_be_visible()

    c.page.get_by_label("Name").fill("laptop")
    c.page.get_by_label("write (also remember, forget, store memories)").uncheck()
    c.page.get_by_label("Expires (optional)").fill("2031-01-01")
    c.page.get_by_role("button", name="Create key").click()
    shown = c.page.locator("dialog code.secret")
    expect(shown).to_have_text(re.compile(r"^egk_[A-Za-z0-9_-]{43}$"))
    key = shown.inner_text()
    expect(c.page.locator("dialog").get_by_role("button", name="Copy")).to_be_visible()
    c.shot("api-keys-created")
    c.page.locator("dialog").get_by_role("button", name="Done").click()

    assert _status_with(c.url, key) == 200  # it works, as a read key
    c.page.reload()
    row = c.page.locator("tbody tr", has_text="laptop")
    expect(row).to_contain_text("read")
    expect(row).not_to_contain_text("write")
    expect(row.locator("td[data-label='Expires']")).not_to_have_text("never")
    expect(row.locator("td[data-label='Last used']")).not_to_have_text("never")  # the use just made
    assert key not in c.page.content()  # shown once: the list has the hint only
    listed = c.api("GET", "/api/me/api-keys")["items"]
    assert [(k["name"], k["scopes"], k["expiresAt"]) for k in listed] == [("laptop", ["read"], "2031-01-01T00:00:00Z")]

    c.page.get_by_role("button", name="Revoke laptop").click()
    c.page.locator("dialog").get_by_role("button", name="Cancel").click()
    assert _status_with(c.url, key) == 200  # not revoked without the confirmation
    c.page.get_by_role("button", name="Revoke laptop").click()
    c.page.locator("dialog").get_by_role("button", name="Revoke").click()
    expect(c.page.get_by_text("No API keys yet.")).to_be_visible()
    assert _status_with(c.url, key) == 401  # at once
    c.shot("api-keys-revoked")
    assert not c.errors, c.errors


def test_the_connect_panel_gives_the_mcp_url_and_the_commands(console):
    c = console("api-keys-connect")
    c.sign_in("kim")
    c.page.goto("/#/keys")
    panel = c.page.get_by_role("region", name="Connect Claude / ChatGPT / Claude Code")
    expect(panel.locator("code.mcp-url")).to_have_text(f"{c.url}/mcp")
    expect(panel).to_contain_text(f'claude mcp add --transport http engram {c.url}/mcp --header "Authorization: Bearer egk_..."')
    desktop = json.loads(panel.locator("pre code").nth(1).inner_text())
    assert desktop["mcpServers"]["engram"]["args"] == [
        "-y",
        "mcp-remote",
        f"{c.url}/mcp",
        "--header",
        "Authorization:${ENGRAM_AUTH}",
    ]
    expect(panel).to_contain_text("McpClientId")
    c.shot("api-keys-connect")
    assert not c.errors, c.errors
