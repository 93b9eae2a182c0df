"""Tools that wait for their owner's approval (TL10), over HTTP on the handlers with a real MCP server
on loopback (the official SDK's server, tests/mcp_servers): a held call pauses the turn (202,
`awaiting_approval`, the held call on the run, no lease held, a new message refused), the owner
approves or denies it (or it expires), the turn resumes in the worker and commits with every
tool_use paired with its result; a second decision and another user's decision are refused; the
audit of every call; heartbeats and manual runs pause and resume the same way."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from engram.kernel.ids import tenant_key
from tests.mcp_servers import McpServers


@pytest.fixture(scope="module")
def servers() -> Iterator[McpServers]:
    running = McpServers.start()
    yield running
    running.running.stop()


def held_agent(stack: Any, servers: McpServers, rule: Any = None, **fields: Any) -> dict[str, Any]:
    r = stack.call("POST", "/api/connections", body={"name": "market", "url": servers.url("sample")})
    assert r.status == 201, r.body
    rule = ["lookup_price"] if rule is None else rule
    return stack.agent(tools=[{"connectionId": r.data["id"], "requireApproval": rule}], **fields)


def session_of(stack: Any, agent_id: str, session: str = "dashboard", user: str = "alice") -> dict[str, Any]:
    r = stack.call("GET", f"/api/agents/{agent_id}/sessions/{session}", user=user)
    assert r.status == 200, r.body
    return r.data


def session_row(stack: Any, agent_id: str, session: str = "dashboard", user: str = "alice") -> dict[str, Any]:
    from engram.aws import keys

    row = stack.deps.sessions.get(tenant_key(user), agent_id, session)
    assert row is not None
    assert keys  # the row as stored: its lease and the waiting mark
    return row


def _sweeping(deps: Any) -> tuple[Any, Any, Any]:
    """The stores the approvals sweeper takes, as the heartbeat function passes them."""
    return deps.runs, deps.approvals, deps.queues


def assert_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every tool_use has its tool_result in the next message, and nothing else is left open."""
    for i, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if uses:
            answered = [b["tool_use_id"] for b in messages[i + 1]["content"] if b.get("type") == "tool_result"]
            assert answered == uses, (uses, answered)


def decide(stack: Any, run_id: str, tool_use_id: str, decision: str, user: str = "alice", note: str | None = None) -> Any:
    body: dict[str, Any] = {"toolUseId": tool_use_id, "decision": decision}
    if note is not None:
        body["note"] = note
    return stack.call("POST", f"/api/runs/{run_id}/approvals", user=user, body=body)


def test_a_held_call_pauses_the_turn_and_an_approval_resumes_it(stack, servers):
    agent = held_agent(stack, servers)
    r = stack.say(agent["id"], "use lookup_price for BTC")
    assert r.status == 202, r.body
    assert r.data["status"] == "awaiting_approval"
    (held,) = r.data["pendingApprovals"]
    assert held["name"] == "mcp__market__lookup_price" and held["input"] == {"symbol": "BTC"}
    assert held["expiresAt"] > held["requestedAt"]
    run_id = r.data["runId"]

    run = stack.call("GET", f"/api/runs/{run_id}").data
    assert run["status"] == "awaiting_approval" and run["pendingApprovals"][0]["toolUseId"] == held["toolUseId"]
    assert "paused" not in run
    waiting = stack.call("GET", "/api/runs", query={"status": "awaiting_approval"}).data["items"]
    assert [w["id"] for w in waiting] == [run_id]
    # Nothing in the transcript yet; no lease held; the session waits for the run.
    assert session_of(stack, agent["id"])["messages"] == []
    row = session_row(stack, agent["id"])
    assert "leaseOwner" not in row and row["awaitingRunId"] == run_id
    # A new message is refused (not queued), naming the run; so is a queued one.
    busy = stack.say(agent["id"], "hello")
    assert busy.status == 409 and busy.error["code"] == "approval_pending" and busy.body["error"]["runId"] == run_id
    queued = stack.call(
        "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", query={"async": "true"}, body={"message": "x"}
    )
    assert queued.status == 409 and queued.error["code"] == "approval_pending"

    spent = stack.call("GET", "/api/usage", query={"agentId": agent["id"]}).data["items"]
    assert {u["runId"] for u in spent} == {run_id} and sum(u["inputTokens"] for u in spent) == run["usage"]["inputTokens"] > 0
    decided = decide(stack, run_id, held["toolUseId"], "approve", note="fine")
    assert decided.status == 200, decided.body
    assert decided.data["pendingApprovals"][0]["decision"] == "approve"
    stack.drain_turns()

    run = stack.call("GET", f"/api/runs/{run_id}").data
    assert run["status"] == "succeeded", run
    (call,) = run["toolCalls"]
    assert (
        "97250.5" in call["result"] and call["decision"] == "approve" and call["decidedBy"] == "alice" and call["note"] == "fine"
    )
    assert call["inputSha256"] == hashlib.sha256(json.dumps({"symbol": "BTC"}, separators=(",", ":")).encode()).hexdigest()
    assert call["resultSha256"] == hashlib.sha256(call["result"].encode()).hexdigest()
    assert "97250.5" in run["result"]["reply"]
    messages = session_of(stack, agent["id"])["messages"]
    assert messages[0]["content"][0]["text"] == "use lookup_price for BTC"
    assert_pairs_intact(messages)
    assert messages[-1]["role"] == "assistant" and "97250.5" in json.dumps(messages[-1])
    # The session is free again and usable; the run's usage was recorded once, in full.
    row = session_row(stack, agent["id"])
    assert "awaitingRunId" not in row and "leaseOwner" not in row
    again = stack.say(agent["id"], "hello again")
    assert again.status == 200, again.body
    assert stack.call("GET", "/api/runs", query={"status": "awaiting_approval"}).data["items"] == []
    rows = [u for u in stack.call("GET", "/api/usage", query={"agentId": agent["id"]}).data["items"] if u["runId"] == run_id]
    # Each spend is recorded once, when it happened: the pause's rows, then the resumed part's.
    assert {u["id"] for u in spent} < {u["id"] for u in rows} and len(rows) == 2 * len(spent)
    assert sum(u["inputTokens"] for u in rows) == run["usage"]["inputTokens"] > sum(u["inputTokens"] for u in spent)
    assert sum(u["costUsd"] for u in rows) == pytest.approx(run["usage"]["costUsd"])


@pytest.fixture(params=["fake", "moto"])
def any_stack(request: pytest.FixtureRequest) -> Any:
    """The in-memory fakes and moto: the decision's list-index update and its conditions on both."""
    return request.getfixturevalue("stack" if request.param == "fake" else "moto_stack")


def test_a_denied_call_gets_an_error_result_with_the_note_and_the_turn_answers(any_stack, servers):
    stack = any_stack
    agent = held_agent(stack, servers, rule=True)
    r = stack.say(agent["id"], "use lookup_price for ETH")
    assert r.status == 202, r.body
    (held,) = r.data["pendingApprovals"]
    assert decide(stack, r.data["runId"], held["toolUseId"], "deny", note="not today").status == 200
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "succeeded", run
    (call,) = run["toolCalls"]
    assert call["isError"] is True and "denied" in call["result"] and "not today" in call["result"]
    assert call["decision"] == "deny" and call["decidedBy"] == "alice"
    messages = session_of(stack, agent["id"])["messages"]
    assert_pairs_intact(messages)
    results = [b for m in messages for b in m["content"] if b.get("type") == "tool_result"]
    assert results[0]["is_error"] is True and "denied" in results[0]["content"]
    assert stack.say(agent["id"], "hello").status == 200


def test_two_tools_in_one_answer_run_the_free_one_and_hold_the_other(stack, servers):
    agent = held_agent(stack, servers)
    r = stack.say(agent["id"], "use lookup_price for ETH and use search_tickets with login")
    assert r.status == 202, r.body
    assert [h["name"] for h in r.data["pendingApprovals"]] == ["mcp__market__lookup_price"]
    # The free call ran before the pause and is on the run already.
    assert [c["name"] for c in r.data["toolCalls"]] == ["mcp__market__search_tickets"]
    assert "ENG-104" in r.data["toolCalls"][0]["result"]
    assert decide(stack, r.data["runId"], r.data["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "succeeded"
    assert sorted(c["name"] for c in run["toolCalls"]) == ["mcp__market__lookup_price", "mcp__market__search_tickets"]
    messages = session_of(stack, agent["id"])["messages"]
    assert_pairs_intact(messages)
    asked = [m for m in messages if m["role"] == "assistant" and sum(b["type"] == "tool_use" for b in m["content"]) == 2]
    assert len(asked) == 1  # one answer, both results in the one message after it


def test_decisions_are_the_owners_once_and_only_while_waiting(stack, servers):
    agent = held_agent(stack, servers)
    r = stack.say(agent["id"], "use lookup_price for SOL")
    run_id, use_id = r.data["runId"], r.data["pendingApprovals"][0]["toolUseId"]
    theirs = decide(stack, run_id, use_id, "approve", user="bob")
    assert theirs.status == 404 and theirs.error["field"] == "runId"
    unknown = decide(stack, run_id, "toolu_nope", "approve")
    assert unknown.status == 404 and unknown.error["field"] == "toolUseId" and "toolu_nope" in unknown.error["message"]
    bad = stack.call("POST", f"/api/runs/{run_id}/approvals", body={"toolUseId": use_id, "decision": "maybe"})
    assert bad.status == 400 and bad.error["field"] == "decision"
    path_like = stack.call("POST", f"/api/runs/{run_id}/approvals", body={"toolUseId": "../x", "decision": "deny"})
    assert path_like.status == 400 and path_like.error["field"] == "toolUseId"
    assert decide(stack, run_id, use_id, "deny").status == 200
    second = decide(stack, run_id, use_id, "approve")
    assert second.status == 409 and second.error["code"] == "already_decided"
    stack.drain_turns()
    after = decide(stack, run_id, use_id, "approve")
    assert after.status == 409
    assert stack.call("GET", f"/api/runs/{run_id}").data["toolCalls"][0]["decision"] == "deny"


def test_an_undecided_request_expires_as_denied_and_the_turn_resumes(stack, servers):
    from engram.approvals.service import sweep_approvals

    agent = held_agent(stack, servers, approvalTimeoutS=60)
    r = stack.say(agent["id"], "use lookup_price for BTC")
    run_id = r.data["runId"]
    early = sweep_approvals(*_sweeping(stack.deps))
    assert early == {"approvalsExpired": 0, "resumesSent": 0}
    import time

    later = int(time.time()) + 120
    assert sweep_approvals(*_sweeping(stack.deps), now=later) == {"approvalsExpired": 1, "resumesSent": 1}
    late = decide(stack, run_id, r.data["pendingApprovals"][0]["toolUseId"], "approve")
    assert late.status == 409
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{run_id}").data
    assert run["status"] == "succeeded"
    (call,) = run["toolCalls"]
    assert call["isError"] is True and call["decidedBy"] == "expired" and "expired" in call["result"]
    assert_pairs_intact(session_of(stack, agent["id"])["messages"])
    assert stack.say(agent["id"], "hello").status == 200


def test_a_lost_resume_job_is_sent_again_by_the_sweeper_and_the_tool_runs_once(stack, servers):
    from engram.approvals.service import sweep_approvals

    agent = held_agent(stack, servers)
    r = stack.say(agent["id"], "use lookup_price for BTC")
    run_id = r.data["runId"]
    real = stack.deps.queues

    class Lost:
        """The resume job's send fails after the decision landed."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def enqueue_turn(self, *args: Any, **kwargs: Any) -> None:
            raise ConnectionError("the queue did not answer")

    stack.deps.queues = Lost()
    try:
        assert decide(stack, run_id, r.data["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    finally:
        stack.deps.queues = real
    stack.drain_turns()
    assert stack.call("GET", f"/api/runs/{run_id}").data["status"] == "awaiting_approval"  # the decision stands
    import time

    assert sweep_approvals(*_sweeping(stack.deps), now=int(time.time()) + 600)["resumesSent"] == 1
    # Sent twice (a redelivery): the second finds the resumption claimed.
    from engram.approvals.service import send_resume

    send_resume(stack.deps.queues, tenant_key("alice"), stack.deps.runs.get(tenant_key("alice"), run_id))
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{run_id}").data
    assert run["status"] == "succeeded"
    assert [c["name"] for c in run["toolCalls"]] == ["mcp__market__lookup_price"]  # called once
    assert_pairs_intact(session_of(stack, agent["id"])["messages"])


def test_a_heartbeat_and_a_manual_run_pause_and_resume(stack, servers):
    agent = held_agent(stack, servers, defaultPrompt="use lookup_price for ETH", schedule="rate(1 hour)")
    fired = stack.fire(agent["id"])
    assert fired["status"] == "awaiting_approval", fired
    run = stack.call("GET", f"/api/runs/{fired['runId']}").data
    assert run["kind"] == "heartbeat" and run["status"] == "awaiting_approval"
    assert stack.fire(agent["id"], when=fired["scheduledTime"])["status"] == "duplicate"  # a redelivered firing
    assert decide(stack, run["id"], run["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    stack.drain_runs()
    done = stack.call("GET", f"/api/runs/{run['id']}").data
    assert done["status"] == "succeeded", done
    assert "3412.75" in done["toolCalls"][0]["result"] and done["toolCalls"][0]["decision"] == "approve"

    manual = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "use lookup_price for BTC"})
    stack.drain_runs()
    waiting = stack.call("GET", f"/api/runs/{manual.data['runId']}").data
    assert waiting["status"] == "awaiting_approval", waiting
    assert decide(stack, waiting["id"], waiting["pendingApprovals"][0]["toolUseId"], "deny").status == 200
    stack.drain_runs()
    denied = stack.call("GET", f"/api/runs/{waiting['id']}").data
    assert denied["status"] == "succeeded" and denied["toolCalls"][0]["isError"] is True


def test_the_rules_are_validated(stack, servers):
    r = stack.call("POST", "/api/agents", body={"name": "A", "requireApproval": ["web_search"]})
    assert r.status == 400 and r.error["field"] == "requireApproval" and "server tool" in r.error["message"]
    r = stack.call("POST", "/api/agents", body={"name": "A", "approvalTimeoutS": 5})
    assert r.status == 400 and r.error["field"] == "approvalTimeoutS"
    ok = stack.call("POST", "/api/agents", body={"name": "A", "requireApproval": ["remember"], "approvalTimeoutS": 3600})
    assert ok.status == 201 and ok.data["requireApproval"] == ["remember"] and ok.data["approvalTimeoutS"] == 3600


# --- faults (tests/faults.py) ------------------------------------------------------------------
def _is_decision(params: dict[str, Any]) -> bool:
    return "pendingApprovals[" in str(params.get("UpdateExpression", ""))


def _is_resume_claim(params: dict[str, Any]) -> bool:
    return ":awaiting" in params.get("ExpressionAttributeValues", {}) and "claimedUntil" in str(params.get("UpdateExpression"))


def test_a_decision_whose_answer_was_lost_stands(stack, servers, faults):
    from tests.faults import LOST

    agent = held_agent(stack, servers)
    r = stack.say(agent["id"], "use lookup_price for BTC")
    faults.add("dynamodb", "UpdateItem", LOST, when=_is_decision)
    decided = decide(stack, r.data["runId"], r.data["pendingApprovals"][0]["toolUseId"], "approve")
    assert faults.injected == [("dynamodb", "UpdateItem", LOST)]
    assert decided.status == 200, decided.body  # the SDK's retry met its own decision, not another's
    stack.drain_turns()
    assert stack.call("GET", f"/api/runs/{r.data['runId']}").data["status"] == "succeeded"


def test_faults_while_resuming_lose_no_decision_and_run_the_tool_once(stack, servers, faults):
    from tests.faults import LOST, REFUSED

    agent = held_agent(stack, servers)
    r = stack.say(agent["id"], "use lookup_price for BTC")
    run_id = r.data["runId"]
    # The claim is refused once (the worker fails, SQS delivers the job again), then the commit's
    # answer is lost (the retry finds it committed).
    faults.add("dynamodb", "UpdateItem", REFUSED, when=_is_resume_claim)
    faults.add("dynamodb", "TransactWriteItems", LOST)
    assert decide(stack, run_id, r.data["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    stack.drain_turns()
    assert ("dynamodb", "UpdateItem", REFUSED) in faults.injected and ("dynamodb", "TransactWriteItems", LOST) in faults.injected
    run = stack.call("GET", f"/api/runs/{run_id}").data
    assert run["status"] == "succeeded", run
    assert run["pendingApprovals"][0]["decision"] == "approve"  # the decision was not lost
    assert [c["name"] for c in run["toolCalls"]] == ["mcp__market__lookup_price"]
    messages = session_of(stack, agent["id"])["messages"]
    assert_pairs_intact(messages)
    assert sum(1 for m in messages for b in m["content"] if b.get("type") == "tool_result") == 1  # the tool ran once
    # A late redelivery changes nothing.
    from engram.approvals.models import ResumeJob
    from engram.approvals.resume import process_resume_job

    assert process_resume_job(stack.deps, ResumeJob(tenant=tenant_key("alice"), run_id=run_id)) == "ignored"
    assert "awaitingRunId" not in session_row(stack, agent["id"]) and stack.say(agent["id"], "hi").status == 200


def test_a_paused_turn_is_announced_on_the_approvals_topic_without_its_input(moto_stack, servers):
    import boto3

    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name="engram-approvals")["TopicArn"]
    inbox = sqs.create_queue(QueueName="approvals-inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn)  # an e-mail subscription's stand-in
    moto_stack.deps.settings = moto_stack.deps.settings.model_copy(update={"approval_topic_arn": topic})
    agent = held_agent(moto_stack, servers)
    r = moto_stack.say(agent["id"], "use lookup_price for BTC")
    assert r.status == 202, r.body
    (message,) = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10)["Messages"]
    envelope = json.loads(message["Body"])
    body = json.loads(envelope["Message"])
    assert body["runId"] == r.data["runId"] and body["agentId"] == agent["id"] and body["agentName"] == "Ada"
    assert body["tools"] == ["mcp__market__lookup_price"] and "waits for your approval" in envelope["Subject"]
    assert "BTC" not in message["Body"]  # the call's input stays out of the notice


def test_two_held_calls_resume_only_when_both_are_decided(stack, servers):
    agent = held_agent(stack, servers, rule=True)
    r = stack.say(agent["id"], "use lookup_price for ETH and use search_tickets with login")
    assert r.status == 202 and r.data["toolCalls"] == []
    first, second = r.data["pendingApprovals"]
    assert decide(stack, r.data["runId"], first["toolUseId"], "approve").status == 200
    stack.drain_turns()
    waiting = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert waiting["status"] == "awaiting_approval"  # one still undecided: nothing resumed
    assert stack.say(agent["id"], "hello").error["code"] == "approval_pending"
    assert decide(stack, r.data["runId"], second["toolUseId"], "deny").status == 200
    stack.drain_turns()
    run = stack.call("GET", f"/api/runs/{r.data['runId']}").data
    assert run["status"] == "succeeded"
    by_name = {c["name"]: c for c in run["toolCalls"]}
    assert "3412.75" in by_name["mcp__market__lookup_price"]["result"]
    assert by_name["mcp__market__search_tickets"]["isError"] is True
    assert [p["decision"] for p in run["pendingApprovals"]] == ["approve", "deny"]
    assert_pairs_intact(session_of(stack, agent["id"])["messages"])


# --- a council waits for its member (runs.council_wait) ----------------------------------------
def memory_of(stack: Any, run_id: str) -> dict[str, Any]:
    r = stack.call("GET", f"/api/runs/{run_id}/memory")
    assert r.status == 200, r.body
    return {e["key"]: e for e in r.data["items"]}


def members_of(stack: Any, lead_run_id: str) -> list[dict[str, Any]]:
    return stack.call("GET", "/api/runs", query={"councilRunId": lead_run_id}).data["items"]


def waiting_council(
    stack: Any, servers: McpServers, **member_fields: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A lead whose one member asks for a held call: (member agent, the lead's run, the member's run)."""
    member = held_agent(stack, servers, name="Scout", **member_fields)
    lead = stack.agent(name="Lead", team=[member["id"]])
    run = stack.run_now(lead["id"], prompt="use lookup_price for BTC. Then decide.")
    (member_run,) = members_of(stack, run["id"])
    return member, run, member_run


def test_a_council_waits_for_its_members_approval_and_the_lead_goes_on_once_approved(any_stack, servers):
    stack = any_stack
    member, run, member_run = waiting_council(stack, servers)
    # The member's turn paused like any run's; the lead waits for it, holding nothing.
    assert member_run["status"] == "awaiting_approval" and member_run["kind"] == "council_member"
    (held,) = member_run["pendingApprovals"]
    assert held["name"] == "mcp__market__lookup_price" and held["input"] == {"symbol": "BTC"}
    assert run["status"] == "awaiting_approval" and run["waitingFor"] == [member_run["id"]] and run["pendingApprovals"] == []
    waiting = {w["id"] for w in stack.call("GET", "/api/runs", query={"status": "awaiting_approval"}).data["items"]}
    assert member_run["id"] in waiting
    entry = memory_of(stack, run["id"])[f"task:{member['id']}"]
    assert entry["value"] == {"status": "awaiting_approval", "runId": member_run["id"]}
    on_lead = decide(stack, run["id"], held["toolUseId"], "approve")  # decided on the member's run, not the lead's
    assert on_lead.status == 404 and member_run["id"] in on_lead.error["message"]

    assert decide(stack, member_run["id"], held["toolUseId"], "approve").status == 200
    stack.drain_runs()  # the member's turn goes on in the run-queue worker, then the lead's
    done = stack.call("GET", f"/api/runs/{run['id']}").data
    assert done["status"] == "succeeded", done
    assert done["waitingFor"] == [] and done["result"]["reply"]
    member_done = stack.call("GET", f"/api/runs/{member_run['id']}").data
    assert member_done["status"] == "succeeded" and member_done["toolCalls"][0]["decision"] == "approve"
    entry = memory_of(stack, run["id"])[f"task:{member['id']}"]
    assert entry["value"]["status"] == "succeeded" and entry["value"]["runId"] == member_run["id"]
    assert "97250.5" in entry["value"]["reply"]  # the member's tool result reached the lead
    assert [m["id"] for m in members_of(stack, run["id"])] == [member_run["id"]]  # run once
    assert stack.call("GET", "/api/runs", query={"status": "awaiting_approval"}).data["items"] == []


def test_a_denied_member_call_reaches_the_lead_as_the_members_denial(any_stack, servers):
    stack = any_stack
    member, run, member_run = waiting_council(stack, servers)
    held = member_run["pendingApprovals"][0]
    assert decide(stack, member_run["id"], held["toolUseId"], "deny", note="not today").status == 200
    stack.drain_runs()
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "succeeded"
    (call,) = stack.call("GET", f"/api/runs/{member_run['id']}").data["toolCalls"]
    assert call["isError"] is True and call["decision"] == "deny" and "denied" in call["result"]
    value = memory_of(stack, run["id"])[f"task:{member['id']}"]["value"]
    assert value["status"] == "succeeded" and value["runId"] == member_run["id"] and "97250.5" not in json.dumps(value)


def test_a_finished_member_is_not_run_again_when_the_lead_goes_on(any_stack, servers):
    stack = any_stack
    held = held_agent(stack, servers, name="Scout")
    free = stack.agent(name="Analyst")
    lead = stack.agent(name="Lead", team=[held["id"], free["id"]])
    run = stack.run_now(lead["id"], prompt="use lookup_price for BTC. Then decide.")
    assert run["status"] == "awaiting_approval"
    by_agent = {m["agentId"]: m for m in members_of(stack, run["id"])}
    assert by_agent[free["id"]]["status"] == "succeeded" and by_agent[held["id"]]["status"] == "awaiting_approval"
    assert run["waitingFor"] == [by_agent[held["id"]]["id"]]
    free_entry = memory_of(stack, run["id"])[f"task:{free['id']}"]
    assert free_entry["value"]["status"] == "succeeded"

    waiting = by_agent[held["id"]]
    assert decide(stack, waiting["id"], waiting["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    stack.drain_runs()
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "succeeded"
    members = members_of(stack, run["id"])
    assert sorted(m["agentId"] for m in members) == sorted([held["id"], free["id"]])  # nobody ran twice
    memory = memory_of(stack, run["id"])
    assert memory[f"task:{free['id']}"] == free_entry  # the finished member's result, as it was
    assert memory[f"task:{held['id']}"]["value"]["status"] == "succeeded"


def test_a_redelivered_continuation_does_nothing(any_stack, servers):
    stack = any_stack
    from engram.approvals.models import ResumeJob
    from engram.approvals.resume import process_resume_job
    from engram.runs.council_wait import send_continuation

    tenant = tenant_key("alice")
    _member, run, member_run = waiting_council(stack, servers)
    job = ResumeJob(tenant=tenant, run_id=run["id"])
    assert process_resume_job(stack.deps, job) == "waiting"  # a member still waits: nothing claimed
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "awaiting_approval"
    assert decide(stack, member_run["id"], member_run["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    send_continuation(stack.deps.queues, tenant, stack.deps.runs.get(tenant, run["id"]))  # sent twice
    stack.drain_runs()
    done = stack.call("GET", f"/api/runs/{run['id']}").data
    assert done["status"] == "succeeded"
    assert process_resume_job(stack.deps, job) == "ignored"  # a late redelivery changes nothing
    assert stack.call("GET", f"/api/runs/{run['id']}").data == done
    # The lead's turn ran once: one usage row set for its run.
    rows = [
        u for u in stack.call("GET", "/api/usage", query={"agentId": run["agentId"]}).data["items"] if u["runId"] == run["id"]
    ]
    assert len(rows) == 1 and rows[0]["inputTokens"] == done["usage"]["inputTokens"]


def test_an_expired_member_approval_lets_the_lead_go_on(any_stack, servers):
    stack = any_stack
    import time

    from engram.approvals.service import sweep_approvals

    member, run, member_run = waiting_council(stack, servers, approvalTimeoutS=60)
    swept = sweep_approvals(*_sweeping(stack.deps), now=int(time.time()) + 180)
    assert swept["approvalsExpired"] == 1
    stack.drain_runs()
    done = stack.call("GET", f"/api/runs/{run['id']}").data
    assert done["status"] == "succeeded", done
    (call,) = stack.call("GET", f"/api/runs/{member_run['id']}").data["toolCalls"]
    assert call["isError"] is True and call["decidedBy"] == "expired"
    assert memory_of(stack, run["id"])[f"task:{member['id']}"]["value"]["status"] == "succeeded"


def test_a_waiting_council_holds_no_lease_and_its_session_takes_chats(stack, servers):
    member = held_agent(stack, servers, name="Scout")
    lead = stack.agent(name="Lead", team=[member["id"]], activeMemory=True)
    run = stack.run_now(lead["id"], prompt="use lookup_price for BTC. Then decide.")
    assert run["status"] == "awaiting_approval" and run["sessionId"] is None
    (member_run,) = members_of(stack, run["id"])
    assert stack.say(lead["id"], "hello").status == 200  # the lead's shared session is free meanwhile
    row = session_row(stack, lead["id"])
    assert "leaseOwner" not in row and "awaitingRunId" not in row
    assert decide(stack, member_run["id"], member_run["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    stack.drain_runs()
    done = stack.call("GET", f"/api/runs/{run['id']}").data
    assert done["status"] == "succeeded" and done["sessionId"] == "dashboard"
    row = session_row(stack, lead["id"])
    assert "leaseOwner" not in row and "awaitingRunId" not in row


def test_a_member_gone_before_it_resumes_still_lets_the_lead_go_on(stack, servers):
    import time

    from engram.approvals.service import sweep_approvals
    from engram.runs.council_wait import sweep_council

    member, run, member_run = waiting_council(stack, servers)
    assert decide(stack, member_run["id"], member_run["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    assert stack.call("DELETE", f"/api/agents/{member['id']}").status in (200, 204)  # gone, its runs too
    stack.drain_runs()  # the member's resume job finds no run: nobody tells the lead
    assert stack.call("GET", f"/api/runs/{member_run['id']}").status == 404
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "awaiting_approval"
    assert (
        sweep_approvals(*_sweeping(stack.deps), now=int(time.time()) + 600, council=partial(sweep_council, stack.deps))[
            "resumesSent"
        ]
        == 1
    )
    stack.drain_runs()
    done = stack.call("GET", f"/api/runs/{run['id']}").data
    assert done["status"] == "succeeded", done
    entry = memory_of(stack, run["id"])[f"task:{member['id']}"]
    assert entry["value"]["status"] == "failed" and entry["title"].endswith("(FAILED)")


def test_the_lead_waits_until_every_held_call_of_its_member_is_decided(stack, servers):
    member = held_agent(stack, servers, rule=True, name="Scout")
    lead = stack.agent(name="Lead", team=[member["id"]])
    run = stack.run_now(lead["id"], prompt="use lookup_price for ETH and use search_tickets with login. Then decide.")
    (member_run,) = members_of(stack, run["id"])
    first, second = member_run["pendingApprovals"]
    assert decide(stack, member_run["id"], first["toolUseId"], "approve").status == 200
    stack.drain_runs()
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "awaiting_approval"  # one still undecided
    assert decide(stack, member_run["id"], second["toolUseId"], "deny").status == 200
    stack.drain_runs()
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "succeeded"
    calls = {c["name"]: c for c in stack.call("GET", f"/api/runs/{member_run['id']}").data["toolCalls"]}
    assert "3412.75" in calls["mcp__market__lookup_price"]["result"] and calls["mcp__market__search_tickets"]["isError"]


def test_a_lost_continuation_is_sent_again_by_the_sweeper(any_stack, servers):
    stack = any_stack
    import time

    from engram.approvals.service import sweep_approvals
    from engram.runs.council_wait import sweep_council

    _member, run, member_run = waiting_council(stack, servers)
    real = stack.deps.queues

    class Lost:
        """The lead's continuation is lost after the member's turn ended."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def enqueue_run(self, body: dict[str, Any], **kwargs: Any) -> None:
            if body.get("runId") == run["id"]:
                raise ConnectionError("the queue did not answer")
            real.enqueue_run(body, **kwargs)

    stack.deps.queues = Lost()
    try:
        assert decide(stack, member_run["id"], member_run["pendingApprovals"][0]["toolUseId"], "approve").status == 200
        stack.drain_runs()
    finally:
        stack.deps.queues = real
    assert stack.call("GET", f"/api/runs/{member_run['id']}").data["status"] == "succeeded"
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "awaiting_approval"  # still waiting
    assert (
        sweep_approvals(*_sweeping(stack.deps), now=int(time.time()) + 600, council=partial(sweep_council, stack.deps))[
            "resumesSent"
        ]
        == 1
    )
    stack.drain_runs()
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "succeeded"
    assert (
        sweep_approvals(*_sweeping(stack.deps), now=int(time.time()) + 600, council=partial(sweep_council, stack.deps))[
            "resumesSent"
        ]
        == 0
    )


def test_a_continuation_that_finds_the_shared_session_busy_waits_and_comes_back(stack, servers):
    from engram.approvals.models import ResumeJob
    from engram.approvals.resume import process_resume_job

    stack.deps.settings = stack.deps.settings.model_copy(update={"run_session_wait_s": 0})
    member = held_agent(stack, servers, name="Scout")
    lead = stack.agent(name="Lead", team=[member["id"]], activeMemory=True)
    run = stack.run_now(lead["id"], prompt="use lookup_price for BTC. Then decide.")
    (member_run,) = members_of(stack, run["id"])
    t = tenant_key("alice")
    stack.deps.sessions.acquire_lease(t, lead["id"], "dashboard", "someone-else", 300)  # a long chat turn
    assert decide(stack, member_run["id"], member_run["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    # What the heartbeat function does with the member's resume job, then with the lead's.
    assert process_resume_job(stack.deps, ResumeJob(tenant=t, run_id=member_run["id"])) == "succeeded"
    assert process_resume_job(stack.deps, ResumeJob(tenant=t, run_id=run["id"])) == "awaiting_approval"
    assert stack.call("GET", f"/api/runs/{run['id']}").data["status"] == "awaiting_approval"  # waits again
    attrs = stack.sqs.get_queue_attributes(
        QueueUrl=stack.resources.queue_url("RunQueue"), AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "1"  # its continuation comes back later
    stack.deps.sessions.release_lease(t, lead["id"], "dashboard", "someone-else")
    assert process_resume_job(stack.deps, ResumeJob(tenant=t, run_id=run["id"])) == "succeeded"
    assert [m["id"] for m in members_of(stack, run["id"])] == [member_run["id"]]


def test_a_heartbeat_on_the_shared_session_pauses_it_and_resumes_into_it(stack, servers):
    agent = held_agent(stack, servers, activeMemory=True, defaultPrompt="use lookup_price for SOL", schedule="rate(1 hour)")
    fired = stack.fire(agent["id"])
    assert fired["status"] == "awaiting_approval", fired
    run = stack.call("GET", f"/api/runs/{fired['runId']}").data
    assert run["sessionId"] == "dashboard" and session_row(stack, agent["id"])["awaitingRunId"] == run["id"]
    assert stack.say(agent["id"], "hello").error["code"] == "approval_pending"  # the chat waits with it
    reset = stack.call("POST", f"/api/agents/{agent['id']}/active-memory/reset")
    assert reset.status == 409 and reset.error["code"] == "approval_pending"
    assert decide(stack, run["id"], run["pendingApprovals"][0]["toolUseId"], "approve").status == 200
    stack.drain_runs()
    done = stack.call("GET", f"/api/runs/{run['id']}").data
    assert done["status"] == "succeeded" and "182.3" in done["toolCalls"][0]["result"]
    messages = session_of(stack, agent["id"])["messages"]
    assert messages[0]["meta"]["runId"] == run["id"] and messages[0]["meta"]["kind"] == "heartbeat"
    assert_pairs_intact(messages)
    panel = stack.call("GET", f"/api/agents/{agent['id']}/active-memory").data
    assert panel["runsSinceReset"] == 1  # the shared session counted the run once, when it committed
    assert stack.say(agent["id"], "hello").status == 200
