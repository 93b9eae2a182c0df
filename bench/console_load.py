"""`make bench` (console): the console's first load over the local stack, in headless Chromium.

Starts the local stack as `make dev` does (offline model, free ports), gives a user 5 agents, then
opens the console 5 times, each in a new browser context (an empty cache, as a first visit) with
the user already signed in (a token in sessionStorage, as after the sign-in form), and prints:
- bytes the page loaded: uncompressed (the files as served without gzip) and as transferred
  (gzip, headers included), split into the app's own code and styles (HTML, JS, CSS, icon) and
  everything else (API answers). There are no vendored libraries.
- the time from navigation start until the agents list is visible, median of the 5 loads.
- a streamed chat turn (issue 38): the API requests and bytes from Send until the page is idle
  again, median of 3 turns; and what the Markdown renderer and sanitiser (vendored, loaded with
  the first reply shown, not with the first load) cost transferred.
Aims (issue 14): the app's own code and styles under 150 kB uncompressed, all of it under 300 kB;
(issue 38) the first load under 30 kB transferred, one data reload per streamed turn.

    python -m bench.console_load [--loads 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

from tests.browser.conftest import CHROMIUM_ARGS, chromium_path  # noqa: E402

USER = "bench-console"
OWN_AIM = 150_000
ALL_AIM = 300_000


def _seed(url: str) -> list[str]:
    ids = []
    for i in range(5):
        request = urllib.request.Request(
            f"{url}/api/agents",
            data=json.dumps({"name": f"Agent {i}", "persona": "You help with one thing well."}).encode(),
            headers={"authorization": f"Bearer dev-{USER}", "content-type": "application/json"},
            method="POST",
        )
        ids.append(json.loads(urllib.request.urlopen(request, timeout=30).read())["data"]["id"])
    return ids


def _wire(response: Any) -> int:
    sizes = response.request.sizes()
    return int(sizes["responseBodySize"] + sizes["responseHeadersSize"])


def _streamed_turns(browser: Any, url: str, agent_id: str, turns: int = 3) -> tuple[list[int], list[int], int]:
    """(API requests per turn, API bytes per turn, renderer bytes) of streamed chat turns."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(
        f"sessionStorage.setItem('engram.token', 'dev-{USER}'); sessionStorage.setItem('engram.user', '{USER}');"
    )
    page = context.new_page()
    responses: list[Any] = []
    page.on("response", lambda r: responses.append(r))
    page.goto(f"{url}/#/agents/{agent_id}/chat")
    page.locator(".live-badge.on").wait_for(timeout=30_000)
    page.wait_for_load_state("networkidle")
    requests, wire, renderer = [], [], 0
    for n in range(turns):
        responses.clear()
        page.get_by_label("Message").fill(f"turn {n} of the bench")
        page.get_by_role("button", name="Send").click()
        page.locator(".message.assistant:not(.live)", has_text=f"turn {n} of the bench").wait_for(timeout=30_000)
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(2000)  # an HTTP follow of the run would poll within this
        api = [r for r in responses if "/api/" in r.url]
        requests.append(len(api))
        wire.append(sum(_wire(r) for r in api))
        renderer += sum(_wire(r) for r in responses if r.url.endswith(("/marked.esm.js", "/purify.min.js")))
    context.close()
    return requests, wire, renderer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    browser_path = chromium_path()
    print("== the console's first load (headless Chromium, local stack, offline model)")
    if browser_path is None:
        print("   skipped: Chromium is not installed (apt-get install -y chromium)")
        return 0
    from playwright.sync_api import sync_playwright

    from local.stack import start_stack

    stack = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        url = stack.url.rstrip("/")
        agent_ids = _seed(url)
        times: list[float] = []
        sizes: dict[str, int] = {}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=browser_path, headless=True, args=CHROMIUM_ARGS)
            for _ in range(args.loads):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                context.add_init_script(
                    f"sessionStorage.setItem('engram.token', 'dev-{USER}'); sessionStorage.setItem('engram.user', '{USER}');"
                )
                page = context.new_page()
                responses: list[Any] = []

                def keep(response: Any, into: list[Any] = responses) -> None:
                    into.append(response)  # (a bound builtin cannot carry Playwright's wrapper)

                page.on("response", keep)
                started = time.perf_counter()
                page.goto(url + "/", wait_until="commit")
                page.locator(".agent-card").nth(4).wait_for(state="visible", timeout=30_000)
                times.append((time.perf_counter() - started) * 1000)
                page.wait_for_load_state("networkidle")
                sizes = {"own_raw": 0, "own_wire": 0, "api_raw": 0, "api_wire": 0, "files": 0}
                for response in responses:
                    kind = "api" if "/api/" in response.url else "own"
                    body = response.body() if response.status == 200 else b""
                    wire = response.request.sizes()
                    sizes[f"{kind}_raw"] += len(body)
                    sizes[f"{kind}_wire"] += wire["responseBodySize"] + wire["responseHeadersSize"]
                    sizes["files"] += kind == "own"
                context.close()
            turn_requests, turn_bytes, renderer = _streamed_turns(browser, url, agent_ids[0])
            browser.close()
    finally:
        stack.stop()
    total_raw = sizes["own_raw"] + sizes["api_raw"]
    print(
        f"   app code and styles: {sizes['files']} files, {sizes['own_raw'] / 1000:.1f} kB uncompressed, "
        f"{sizes['own_wire'] / 1000:.1f} kB transferred (gzip, with headers)  aim < {OWN_AIM / 1000:.0f} kB uncompressed"
    )
    print(f"   API answers:         {sizes['api_raw'] / 1000:.1f} kB uncompressed, {sizes['api_wire'] / 1000:.1f} kB transferred")
    print(f"   in all:              {total_raw / 1000:.1f} kB uncompressed  aim < {ALL_AIM / 1000:.0f} kB")
    print(
        f"   agents list visible: median {statistics.median(times):.0f} ms over {len(times)} first loads "
        f"(min {min(times):.0f}, max {max(times):.0f})"
    )
    print(
        f"   a streamed turn:     median {statistics.median(turn_requests):.0f} API requests, "
        f"{statistics.median(turn_bytes) / 1000:.1f} kB transferred (per turn: {turn_requests}, from Send until idle)  aim: one reload"
    )
    print(
        f"   Markdown renderer:   {renderer / 1000:.1f} kB transferred, once, with the first reply shown (not in the first load)"
    )
    first_load = sizes["own_wire"] + sizes["api_wire"]
    print(f"   first load in all:   {first_load / 1000:.1f} kB transferred  aim < 30 kB")
    verdict = sizes["own_raw"] < OWN_AIM and total_raw < ALL_AIM
    print(f"   verdict: {'ok' if verdict else 'FAIL'}")
    return 0 if verdict else 1


if __name__ == "__main__":
    raise SystemExit(main())
