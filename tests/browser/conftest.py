"""The console in a real browser: headless Chromium (Debian's `chromium` package, never a browser
downloaded at test time) driven by Playwright for Python, against the local stack `make dev` runs,
on free ports.

Without Chromium these tests are skipped, loudly (the summary says so); with
ENGRAM_REQUIRE_BROWSER=1 (set by .ci/run, which installs Chromium) a missing browser fails them.
Every test saves screenshots under test-artifacts/console/ (see `shot`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"
# What Chromium needs here: no sandbox as root, no background traffic (the machine has no network).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    for candidate in (
        os.environ.get("CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


_SKIPPED: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if chromium_path():
        return
    browser_items = [item for item in items if "tests/browser/" in str(item.fspath).replace(os.sep, "/")]
    if not browser_items:
        return
    if os.environ.get("ENGRAM_REQUIRE_BROWSER") == "1":
        return  # the `browser` fixture fails each test, naming what is missing
    reason = "Chromium not found (apt-get install -y chromium): the console's browser tests did NOT run"
    for item in browser_items:
        item.add_marker(pytest.mark.skip(reason=reason))
    _SKIPPED.extend(item.nodeid for item in browser_items)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SKIPPED:
        line = "!" * 78
        terminalreporter.write_line(line, red=True, bold=True)
        terminalreporter.write_line(
            f"  {len(_SKIPPED)} BROWSER TESTS SKIPPED: Chromium is not installed. Install it with", red=True, bold=True
        )
        terminalreporter.write_line("  `apt-get install -y chromium` to test the console (CI always does).", red=True, bold=True)
        terminalreporter.write_line(line, red=True, bold=True)


@pytest.fixture(scope="session", autouse=True)
def _patient_expectations() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # a chat turn on a busy 2-core machine takes a few seconds


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.fail(
            "Chromium is required (ENGRAM_REQUIRE_BROWSER=1) but /usr/bin/chromium is missing: apt-get install -y chromium"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from local.stack import start_stack

    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        yield handle
    finally:
        handle.stop()


class Console:
    """One browser context (a tab's storage of its own) on the stack's console, plus the API as
    the same person for setting things up quickly (driving 21 runs by hand would test nothing)."""

    def __init__(self, browser: Any, stack: Any, name: str, *, width: int = 1280, height: int = 800) -> None:
        self.url = stack.url.rstrip("/")
        self.stack = stack
        self.context = browser.new_context(viewport={"width": width, "height": height}, base_url=self.url)
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))
        self.page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        self.name = name

    def sign_in(self, user: str) -> None:
        self.user = user
        self.page.goto("/")
        self.page.get_by_label("Dev user").fill(user)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.get_by_role("heading", name="Agents").wait_for()

    def shot(self, name: str, *, full_page: bool = True) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        request.add_header("authorization", f"Bearer dev-{self.user}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            raise AssertionError(f"{method} {path}: {err.code} {err.read()[:300]!r}") from None
        return payload.get("data")

    def wait_run(self, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.api("GET", f"/api/runs/{run_id}")
            if run["status"] in ("succeeded", "failed"):
                return run
            time.sleep(0.2)
        raise AssertionError(f"run {run_id} did not finish")

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def console(browser: Any, stack: Any, request: pytest.FixtureRequest) -> Iterator[Console]:
    opened: list[Console] = []

    def open_console(name: str = request.node.name, **size: int) -> Console:
        c = Console(browser, stack, name, **size)
        opened.append(c)
        return c

    yield open_console  # type: ignore[misc]
    for c in opened:
        c.close()


@pytest.fixture(scope="module")
def sample_servers() -> Iterator[Any]:
    """Real MCP servers on loopback (tests/mcp_servers.py): `sample_servers.url("sample")` is the
    sample server of local/sample_mcp.py (lookup_price, search_tickets)."""
    from tests.mcp_servers import McpServers

    running = McpServers.start()
    yield running
    running.running.stop()
