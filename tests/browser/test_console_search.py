"""The memory page searches on the server (issue 38, item 2): with 120 rows, of which the page shows
50, searching "zebra117" finds its row; the source filter asks the API too. Desktop and phone. The
facts page searches every fact the same way."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_console import no_page_errors


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_memory_search_finds_a_row_that_is_not_on_the_page(console, width, height):
    c = console(width=width, height=height)
    c.sign_in(f"searcher-{width}")
    agent = c.api("POST", "/api/agents", {"name": "Zoo", "agentMemory": True})
    for i in range(120):
        c.api("POST", f"/api/agents/{agent['id']}/memories", {"key": f"animal {i:03d}", "value": f"zebra{i} grazes"})
    c.page.goto(f"/#/memory/agent/{agent['id']}")
    rows = c.page.locator(".memory-table tbody tr")
    expect(rows).to_have_count(50)
    c.page.get_by_label("Search").fill("zebra117")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("animal 117")
    c.shot(f"memory-search-{width}", full_page=False)
    c.page.get_by_label("Search").fill("")
    c.page.get_by_label("Source").select_option("auto")
    expect(c.page.locator(".memory-table")).to_contain_text("No memories match.")
    no_page_errors(c)


def test_the_facts_page_searches_every_fact(console):
    c = console()
    c.sign_in("fact-searcher")
    for i in range(60):
        c.api("POST", "/api/me/facts", {"fact": f"I visited city number {i}"})
    c.api("POST", "/api/me/facts", {"fact": "My cat is called Pixel"})
    c.page.goto("/#/facts")
    expect(c.page.locator("article.fact")).to_have_count(50)
    c.page.get_by_label("Search").fill("pixel")
    expect(c.page.locator("article.fact")).to_have_count(1)
    expect(c.page.locator("article.fact")).to_contain_text("My cat is called Pixel")
    c.page.get_by_label("Search").fill("no-such-thing")
    expect(c.page.locator(".facts-list")).to_contain_text("No fact matches")
    no_page_errors(c)
