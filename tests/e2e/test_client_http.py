"""The Python client (clients/python) against the local stack over HTTP, as a program would use it:
every operation of docs/openapi.yaml called through its client method (a recording transport
checks that none was left out), a paging iterator over several pages, errors as the exception of
their status, an API key made and used, and a streamed turn whose deltas are the stored reply."""

from __future__ import annotations

import re
import time
import uuid

import httpx2
import pytest

from engram_client import Client
from engram_client.client import OPERATIONS
from engram_client.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    EngramError,
    NotFoundError,
    PermissionDeniedError,
)
from local.sample_mcp import start as start_sample_mcp


class Recording(httpx2.HTTPTransport):
    """The real transport, noting each (method, path) it carried."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.add((request.method, request.url.path))
        return super().handle_request(request)


def operations_called(seen: set[tuple[str, str]]) -> set[str]:
    called = set()
    for op_id, op in OPERATIONS.items():
        pattern = re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", op.path) + "$")
        if any(method == op.method and pattern.match(path) for method, path in seen):
            called.add(op_id)
    return called


@pytest.fixture(scope="module")
def stack_url(live):
    return live.url.rstrip("/")


@pytest.fixture(scope="module")
def sample():
    running = start_sample_mcp()
    yield running
    running.stop()


def user_client(url: str, transport: httpx2.BaseTransport | None = None) -> Client:
    """A client for a user of its own (dev-<user> is the local stack's sign-in token)."""
    return Client(url, f"dev-client-{uuid.uuid4().hex[:8]}", transport=transport, timeout=60)


def test_every_operation_through_the_client(stack_url, sample):
    recorder = Recording()
    engram = user_client(stack_url, recorder)

    assert engram.health()["status"] == "ok"

    # workspaces and agents
    ws = engram.create_workspace(name="Team", description="the team's memory")
    assert engram.get_workspace(ws["id"])["name"] == "Team"
    assert engram.update_workspace(ws["id"], name="Core team")["name"] == "Core team"
    assert [w["id"] for w in engram.list_workspaces()["items"]] == [ws["id"]]
    agent = engram.create_agent(name="Scout", persona="Be brief.", workspaceId=ws["id"], agentMemory=True)
    assert agent["webhookSecret"] and engram.get_agent(agent["id"])["workspaceId"] == ws["id"]
    assert engram.update_agent(agent["id"], persona="Be very brief.")["persona"] == "Be very brief."
    assert agent["id"] in [a["id"] for a in engram.list_agents()["items"]]
    rotated = engram.rotate_webhook_secret(agent["id"])
    assert rotated["agentId"] == agent["id"] and rotated["webhookSecret"] != agent["webhookSecret"]

    # sessions and turns
    session = engram.create_session(agent["id"], id="research", title="Research")
    assert session["id"] == "research"
    assert {s["id"] for s in engram.list_sessions(agent["id"])["items"]} == {"dashboard", "research"}
    turn = engram.send_message(agent["id"], "dashboard", "remember that I only drink green tea")
    assert turn["toolCalls"][0]["name"] == "remember" and turn["usage"]["inputTokens"] > 0
    queued = engram.queue_message(agent["id"], "research", "did we talk about tea?")
    assert engram.wait_for_run(queued["runId"])["status"] == "succeeded"
    hook = engram.post_webhook(agent["id"], rotated["webhookSecret"], "a note from the webhook", session_id="research")
    assert engram.wait_for_run(hook["runId"])["trigger"] == "webhook"
    messages = engram.get_session(agent["id"], "research")["messages"]
    assert messages[0]["content"][0]["text"] == "did we talk about tea?"
    hits = engram.search_archive(agent["id"], "green tea")["items"]
    assert any("green tea" in hit["text"] for hit in hits)
    assert engram.delete_session(agent["id"], "research")["deleted"] is True

    # memories of both scopes and facts
    mem = engram.upsert_agent_memory(agent["id"], key="deploy", value="make deploy from the repo root")
    assert engram.update_agent_memory(agent["id"], mem["id"], importance=80)["importance"] == 80
    assert engram.pin_agent_memory(agent["id"], mem["id"])["pinned"] is True
    assert [m["key"] for m in engram.list_agent_memories(agent["id"])["items"]] == ["deploy"]
    assert engram.delete_agent_memory(agent["id"], mem["id"])["deleted"] is True
    wmem = engram.upsert_workspace_memory(ws["id"], key="db", value="PostgreSQL 16")
    assert engram.update_workspace_memory(ws["id"], wmem["id"], value="PostgreSQL 17")["value"] == "PostgreSQL 17"
    assert engram.pin_workspace_memory(ws["id"], wmem["id"], pinned=True)["pinned"] is True
    assert "db" in [m["key"] for m in engram.list_workspace_memories(ws["id"])["items"]]
    assert engram.delete_workspace_memory(ws["id"], wmem["id"])["deleted"] is True
    fact = engram.add_fact(fact="I work from Lisbon", topic="work")
    assert engram.update_fact(fact["id"], confidence="inferred")["confidence"] == "inferred"
    facts = engram.list_facts()["items"]
    assert {"I only drink green tea", "I work from Lisbon"} <= {f["fact"] for f in facts}
    assert engram.archive_fact(fact["id"])["archivedAt"]

    # runs, cards, decisions, re-examination, run memory, active memory
    assert "decision" in [c["name"] for c in engram.list_card_types()["items"]]
    assert engram.get_card_type("trade-decision")["reExaminable"] == "until_resolved"
    custom = engram.put_card_type("mood", fields={"mood": {"type": "string", "required": True}}, description="how it feels")
    assert custom["builtIn"] is False
    trader = engram.create_agent(name="Trader", defaultPrompt="Analyse BTC.", cardType="trade-decision")
    started = engram.create_run(trader["id"], inputs={"asset": "BTC"})
    run = engram.wait_for_run(started["runId"])
    assert run["status"] == "succeeded" and run["result"]["card"]
    assert [r["id"] for r in engram.list_runs(trader["id"])["items"]] == [run["id"]]
    assert [r["id"] for r in engram.list_all_runs(agent_id=trader["id"], kind="manual")["items"]] == [run["id"]]
    assert engram.get_run(run["id"])["kind"] == "manual"
    assert engram.list_decisions(trader["id"])["items"][0]["runId"] == run["id"]
    assert "input:asset" in [e["key"] for e in engram.get_run_memory(run["id"])["items"]]
    again = engram.re_examine_run(run["id"])
    assert engram.wait_for_run(again["runId"])["kind"] == "reexamination"
    assert [r["id"] for r in engram.list_re_examinations(run["id"])["items"]] == [again["runId"]]
    assert engram.update_run(run["id"], "resolved")["resolutionStatus"] == "resolved"
    panel = engram.get_active_memory(trader["id"])
    assert panel["enabled"] is False and engram.reset_active_memory(trader["id"])["runsSinceReset"] == 0

    # tool servers: a connection to the sample MCP server, a turn calling it, its whole result
    conn = engram.create_connection(name="market", url=sample.url)
    assert [t["name"] for t in engram.test_connection(conn["id"])["tools"]] == ["lookup_price", "search_tickets"]
    assert engram.refresh_connection_tools(conn["id"])["ok"] is True
    assert engram.get_connection(conn["id"])["tools"]["tools"]
    # An OAuth connection to a server that asks for no sign-in: starting its authorization says why not.
    open_conn = engram.create_connection(name="open", url=sample.url, oauth={})
    assert open_conn["oauth"]["status"] == "needs_authorization"
    with pytest.raises(EngramError) as refused:
        engram.start_connection_authorization(open_conn["id"])
    assert 400 <= refused.value.status < 500 and refused.value.message
    assert engram.delete_connection(open_conn["id"])["deleted"] is True
    assert engram.update_connection(conn["id"], description="prices")["description"] == "prices"
    assert [c["id"] for c in engram.list_connections()["items"]] == [conn["id"]]
    engram.update_agent(agent["id"], tools=[{"connectionId": conn["id"]}])
    priced = engram.send_message(agent["id"], "dashboard", "use lookup_price for BTC")
    call = engram.get_run(priced["runId"])["toolCalls"][0]
    whole = engram.get_tool_result(priced["runId"], call["toolUseId"])
    assert whole["name"] == "mcp__market__lookup_price" and whole["complete"] is True
    timeline = engram.get_run_trace(priced["runId"])  # OB1: the run's spans, the tool call among them
    assert [s["name"] for s in timeline["spans"] if s["kind"] == "tool"] == ["execute_tool mcp__market__lookup_price"]
    # A tool that waits for approval (TL10): the turn pauses, the owner approves, it resumes.
    engram.update_agent(agent["id"], tools=[{"connectionId": conn["id"], "requireApproval": ["lookup_price"]}])
    paused = engram.send_message(agent["id"], "dashboard", "use lookup_price for ETH")
    assert paused.get("status") == "awaiting_approval"
    (held,) = [p for r in engram.iter_waiting(agent_id=agent["id"]) for p in r["pendingApprovals"]]
    assert engram.decide_approval(paused["runId"], held["toolUseId"], "approve")["pendingApprovals"][0]["decision"] == "approve"
    resumed = engram.get_run(paused["runId"])
    for _ in range(300):  # the chat worker takes the resume job
        if resumed["status"] not in ("awaiting_approval", "running"):
            break
        time.sleep(0.1)
        resumed = engram.get_run(paused["runId"])
    assert resumed["status"] == "succeeded" and resumed["toolCalls"][-1]["decision"] == "approve"
    assert engram.delete_connection(conn["id"])["agentsChanged"] == 1

    # usage
    usage = engram.list_usage(agent_id=agent["id"])
    assert usage["items"] and usage["totals"]["inputTokens"] == sum(u["inputTokens"] for u in usage["items"])
    assert usage["breakdown"]["totals"]["inputTokens"] >= usage["totals"]["inputTokens"]  # the jobs' rows too

    # API keys: made with the sign-in token, then used as the bearer
    assert engram.update_me("Caroline") == {"name": "Caroline", "limits": {}} and engram.get_me()["name"] == "Caroline"
    assert engram.update_me(limits={"monthlyCostUsd": 100}) == {"name": "Caroline", "limits": {"monthlyCostUsd": 100}}
    assert engram.usage_breakdown(agent_id=agent["id"])["spending"]["limits"] == {}
    key = engram.create_api_key(name="laptop", scopes=["read"])
    assert key["key"].startswith("egk_") and [k["id"] for k in engram.list_api_keys()["items"]] == [key["id"]]
    with Client(stack_url, key["key"], transport=recorder) as by_key:
        assert agent["id"] in [a["id"] for a in by_key.list_agents()["items"]]
        with pytest.raises(PermissionDeniedError) as refused:
            by_key.create_agent(name="Not with a read key")
        assert refused.value.code == "insufficient_scope"
        # the MCP server, one JSON-RPC call (it takes an API key or an access token, not a sign-in of the dev stack)
        init = by_key.mcp(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "engram-client", "version": "0"},
                },
            }
        )
        assert init["id"] == 1 and init["result"]["serverInfo"]["name"]
    assert engram.delete_api_key(key["id"])["deleted"] is True

    # streaming: a ticket, then a turn over the socket
    assert engram.create_stream_ticket()["url"].startswith("ws://")
    events = list(engram.stream_turn(agent["id"], "dashboard", "what time is it?"))
    assert events[-1]["type"] == "turn.completed"

    # export, then deleting what was made
    export = engram.start_export()
    for _ in range(200):
        status = engram.get_export(export["exportId"])
        if status["status"] in ("succeeded", "failed"):
            break
        engram._sleep(0.1)
    assert status["status"] == "succeeded" and status["downloadUrl"]
    assert {a["id"] for a in engram.export_inline()["agents"]} == {agent["id"], trader["id"]}
    engram.update_agent(agent["id"], workspaceId=None)
    assert engram.delete_agent(trader["id"])["deleted"] is True
    assert engram.delete_agent(agent["id"])["sessionsDeleted"] >= 1
    assert engram.delete_workspace(ws["id"])["deleted"] is True
    assert engram.delete_account()["deleted"]["facts"] >= 1

    missing = set(OPERATIONS) - operations_called(recorder.seen)
    assert not missing, f"operations not called through the client: {sorted(missing)}"


def test_a_paging_iterator_walks_every_page(stack_url):
    with user_client(stack_url) as engram:
        made = [engram.add_fact(fact=f"I have visited city number {i}")["id"] for i in range(7)]
        first = engram.list_facts(limit=3)
        assert len(first["items"]) == 3 and first["nextToken"]
        assert sorted(f["id"] for f in engram.iter_facts(limit=3)) == sorted(made)


def test_errors_arrive_as_the_exception_of_their_status(stack_url):
    with user_client(stack_url) as engram:
        with pytest.raises(NotFoundError) as missing:
            engram.get_agent("ag_nobody")
        assert missing.value.code == "not_found" and missing.value.status == 404
        with pytest.raises(BadRequestError) as invalid:
            engram.create_agent(name="")
        assert invalid.value.code == "validation_error" and invalid.value.field == "name"
        agent = engram.create_agent(name="Ada")
        engram.create_session(agent["id"], id="s1")
        with pytest.raises(ConflictError) as exists:
            engram.create_session(agent["id"], id="s1")
        assert exists.value.code == "session_exists"
    with Client(stack_url, "egk_" + "A" * 43) as stranger, pytest.raises(AuthenticationError):
        stranger.list_agents()


def test_a_streamed_turns_deltas_are_the_stored_reply(stack_url):
    with user_client(stack_url) as engram:
        agent = engram.create_agent(name="Ada", persona="You help.")
        events = list(engram.stream_turn(agent["id"], "dashboard", "tell me something " * 40))
        kinds = [e["type"] for e in events]
        assert kinds[0] == "turn.queued" and kinds[1] == "turn.started" and kinds[-1] == "turn.completed"
        deltas = [e for e in events if e["type"] == "text.delta"]
        last_round = max(d["round"] for d in deltas)
        reply = "".join(d["text"] for d in deltas if d["round"] == last_round)
        stored = engram.get_session(agent["id"], "dashboard")["messages"][-1]["content"][0]["text"]
        assert reply == events[-1]["reply"] == stored


def test_a_subscription_sees_a_turn_queued_over_http(stack_url):
    with user_client(stack_url) as engram, engram.stream() as stream:
        agent = engram.create_agent(name="Ada")
        stream.subscribe(agent["id"], "dashboard")
        queued = engram.queue_message(agent["id"], "dashboard", "queued from elsewhere")
        seen = []
        for event in stream.events(idle_timeout=60):
            seen.append(event)
            if event["type"] == "turn.completed":
                break
        assert {e.get("runId") for e in seen} == {queued["runId"]}
        assert seen[0]["type"] == "turn.started" and seen[0]["message"] == "queued from elsewhere"


def test_a_turn_sent_again_on_a_new_socket_after_it_ran_answers_with_its_run(stack_url):
    """What `engram chat` does when a socket is lost: the same clientTurnId again runs nothing."""
    with user_client(stack_url) as engram:
        agent = engram.create_agent(name="Ada")
        with engram.stream() as stream:
            first = list(stream.turn(agent["id"], "dashboard", "hello", client_turn_id="once"))
        with engram.stream() as stream:
            (again,) = list(stream.turn(agent["id"], "dashboard", "hello", client_turn_id="once"))
        assert again["type"] == "turn.queued" and again["status"] == "succeeded" and again["runId"] == first[0]["runId"]
        assert engram.get_run(again["runId"])["result"]["reply"] == first[-1]["reply"]
        assert engram.get_session(agent["id"], "dashboard")["messageCount"] == 2  # one turn: the message and its reply
