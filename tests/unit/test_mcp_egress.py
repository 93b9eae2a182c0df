"""TL5 without a network: the egress policy on literal addresses, and the guarded network backend
with a stub resolver (a name that resolves to a private address is refused before any connection,
whatever the name looks like: DNS rebinding). Also TL2's naming and ordering of MCP tools."""

from __future__ import annotations

import ipaddress
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpcore2
import pytest

from engram.connections.egress import EgressPolicy, EgressRefused, guarded_backend
from engram.connections.mcp_client import Endpoint, list_tools
from engram.connections.mcp_http import McpFailure
from engram.connections.tools import result_text, tool_name
from engram.engine.loop import offered_tools
from engram.engine.tools import ToolContext, default_registry

PUBLIC = EgressPolicy.of("public", allow_private=False)
VPC = EgressPolicy.of("public", allow_private=True)
LOCAL = EgressPolicy.of("local", allow_private=False)


@pytest.mark.parametrize(
    ("address", "public", "vpc", "local"),
    [
        ("93.184.216.34", True, True, True),
        ("2606:4700::1111", True, True, True),
        ("10.1.2.3", False, True, True),
        ("172.16.0.1", False, True, True),
        ("192.168.0.10", False, True, True),
        ("100.64.0.1", False, True, True),  # shared address space (carrier NAT)
        ("fd12::1", False, True, True),  # unique local
        ("127.0.0.1", False, False, True),
        ("::1", False, False, True),
        ("169.254.169.254", False, False, False),  # instance metadata: never
        ("169.254.170.2", False, False, False),  # the ECS task metadata
        ("fe80::1", False, False, False),
        ("fd00:ec2::254", False, False, False),  # the metadata service over IPv6
        ("::ffff:169.254.169.254", False, False, False),  # IPv4-mapped
        ("::ffff:10.0.0.1", False, True, True),
        ("64:ff9b::a9fe:a9fe", False, False, False),  # NAT64 of 169.254.169.254
        ("2002:a9fe:a9fe::1", False, False, False),  # 6to4 of 169.254.169.254
        ("0.0.0.0", False, False, False),
        ("224.0.0.1", False, False, False),
    ],
)
def test_addresses_by_mode(address, public, vpc, local):
    ip = ipaddress.ip_address(address)
    assert (PUBLIC.refusal(ip) is None) is public
    assert (VPC.refusal(ip) is None) is vpc
    assert (LOCAL.refusal(ip) is None) is local


def test_urls_need_https_in_aws_and_literal_hosts_are_checked_at_once():
    PUBLIC.check_url("https://tools.example.com/mcp")  # a name: checked when connecting
    for url in ("http://tools.example.com/mcp", "https://10.0.0.1/mcp", "https://localhost:8443/mcp", "https://[::1]/mcp"):
        with pytest.raises(EgressRefused):
            PUBLIC.check_url(url)
    LOCAL.check_url("http://127.0.0.1:3001/mcp")


def _connect_attempts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    attempts: list[Any] = []

    async def refuse(self: Any, host: str, port: int, **kw: Any) -> Any:
        attempts.append((host, port))
        raise httpcore2.ConnectError("no network in tests")

    monkeypatch.setattr(httpcore2.AnyIOBackend, "connect_tcp", refuse)
    return attempts


@pytest.mark.parametrize("answer", [["10.0.0.7"], ["169.254.169.254"], ["93.184.216.34", "127.0.0.1"], ["::ffff:192.168.1.1"]])
def test_a_name_that_resolves_to_a_refused_address_opens_no_connection(monkeypatch, answer):
    attempts = _connect_attempts(monkeypatch)

    async def resolver(host: str, port: int) -> list[str]:
        return answer

    with pytest.raises(McpFailure) as failure:
        list_tools(
            Endpoint("https://rebind.example.com/mcp", timeout_s=2),
            PUBLIC,
            max_tools=10,
            max_schema_bytes=1000,
            max_bytes=10_000,
            resolver=resolver,
        )
    assert failure.value.code == "egress_refused"
    assert attempts == []  # refused before any connection


def test_an_allowed_address_is_the_one_connected_to(monkeypatch):
    attempts = _connect_attempts(monkeypatch)

    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    backend = guarded_backend(PUBLIC, resolver)
    # On a thread of its own: the sync Playwright of the browser tests keeps a loop on this one.
    with ThreadPoolExecutor(1) as pool, pytest.raises(httpcore2.ConnectError):
        pool.submit(anyio.run, lambda: backend.connect_tcp("tools.example.com", 443)).result()
    assert attempts == [("93.184.216.34", 443)]  # the checked address, not the name again


def test_tool_names_follow_the_notes_and_fit_the_model_limit():
    assert tool_name("orchestrator", "get_my_decisions") == "mcp__orchestrator__get_my_decisions"
    assert tool_name("market", "price.lookup/v2") == "mcp__market__price_lookup_v2"
    assert len(tool_name("market", "x" * 200)) == 64


def test_mcp_tools_lead_the_request_sorted_so_the_cached_prefix_is_stable():
    class Stub:
        def __init__(self, names: list[str]):
            self.names = names

        def specs(self) -> list[dict[str, Any]]:
            return [{"name": n, "description": "", "input_schema": {"type": "object"}} for n in self.names]

    ctx = ToolContext(tenant="t", agent=None, session_id="s", run_id="r")  # type: ignore[arg-type]
    ctx.toolsets = [Stub(["mcp__z__b", "mcp__a__c"]), Stub(["mcp__m__a"])]  # type: ignore[list-item]
    names = [spec["name"] for spec in offered_tools(default_registry(), ctx)]
    assert names == ["mcp__a__c", "mcp__m__a", "mcp__z__b", "get_current_time"]


def test_result_text_shows_what_a_model_can_read():
    assert (
        result_text([{"type": "text", "text": "a"}, {"type": "image", "mimeType": "image/png"}], None)
        == "a\n[image content: image/png]"
    )
    assert result_text([], {"price": 1}) == '{"price": 1}'
    assert result_text([], None) == "(the tool returned nothing)"


def test_each_tool_call_is_counted_per_connection(monkeypatch, capsys):
    import json

    from engram.connections.mcp_client import CallResult
    from engram.connections.mcp_http import McpFailure
    from engram.connections.tools import _count

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    _count("market", CallResult(ok=True, duration_ms=12.5))
    _count("tickets", CallResult(ok=False, failure=McpFailure("timeout", "slow"), duration_ms=2000))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    seen = {(next(iter(set(line) - {"_aws", "Connection"})), line["Connection"]) for line in lines}
    assert seen == {
        ("ToolCalls", "market"),
        ("ToolCallLatency", "market"),
        ("ToolCalls", "tickets"),
        ("ToolCallLatency", "tickets"),
        ("ToolCallErrors", "tickets"),
    }
