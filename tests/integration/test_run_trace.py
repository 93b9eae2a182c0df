"""A run's timeline (OB1, issue 37): the spans a turn records (memory reads, model calls, parallel
MCP tool calls, the transcript GET and PUT, the lease, the commit) and the jobs it caused (the
summary fold), stored with the run, served by GET /api/runs/{runId}/trace to its owner only,
exported with the account and deleted with the agent. Ordering and nesting are checked, never
durations. The attribute names are checked against the OpenTelemetry semantic conventions package."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

from engram.aws import keys
from engram.kernel.ids import tenant_key
from local.workers import Workers
from tests.integration.test_mcp_tools import acting_agent, connect, servers  # noqa: F401 (the MCP servers fixture)

BOTH_TOOLS = "use lookup_price for ETH and use search_tickets with login"
SECRET = "sk-ant-api03-" + "Q" * 93 + "AA"
# Every gen_ai.* name the conventions define (the package spells them as constants).
CONVENTIONS = {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_") and isinstance(v, str)}


def _trace(stack: Any, run_id: str, user: str = "alice") -> dict[str, Any]:
    r = stack.call("GET", f"/api/runs/{run_id}/trace", user=user)
    assert r.status == 200, r.body
    return r.data


def _drain_jobs(stack: Any) -> None:
    Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)


def _by_kind(trace: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [s for s in trace["spans"] if s["kind"] == kind]


def _one(trace: dict[str, Any], kind: str) -> dict[str, Any]:
    (span,) = _by_kind(trace, kind)
    return span


def _turn_that_cuts(stack: Any, agent_id: str) -> str:
    """Turns with both tools until one's save cuts the transcript (a summary job follows it)."""
    for _ in range(10):
        before = stack.call("GET", f"/api/agents/{agent_id}/sessions/dashboard").data["trimmedCount"]
        r = stack.say(agent_id, BOTH_TOOLS)
        assert r.status == 200, r.body
        assert len(r.data["toolCalls"]) == 2
        if stack.call("GET", f"/api/agents/{agent_id}/sessions/dashboard").data["trimmedCount"] > before:
            return str(r.data["runId"])
        _drain_jobs(stack)  # the earlier turns' jobs stay out of the way
    raise AssertionError("no turn cut the transcript")


def test_a_turn_with_memory_reads_two_parallel_tool_calls_and_a_summary_fold_has_its_span_tree(stack, servers):  # noqa: F811
    stack.deps.settings = stack.deps.settings.model_copy(update={"history_cap": 4})
    agent = acting_agent(stack, connect(stack, servers, "market"), agentMemory=True)
    run_id = _turn_that_cuts(stack, agent["id"])
    _drain_jobs(stack)  # the summary fold (and the extraction) record their spans under the run
    trace = _trace(stack, run_id)

    assert trace["runId"] == run_id and trace["agentId"] == agent["id"] and trace["status"] == "succeeded"
    assert trace["truncated"] is False and trace["contentCaptured"] is False
    assert len(trace["traceId"]) == 32 and trace["parts"][0] == "turn" and "summary" in trace["parts"]
    spans = trace["spans"]
    by_id = {s["id"]: s for s in spans}
    root = _one(trace, "agent")
    assert root["parentId"] is None and root["depth"] == 0 and root["name"] == f"invoke_agent {agent['name']}"
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.agent.id"] == agent["id"] and root["attributes"]["gen_ai.conversation.id"] == "dashboard"
    # every span hangs off the root, the turn's directly, a job's model call through its job
    for span in spans:
        if span is not root:
            assert span["parentId"] in by_id, span["name"]
            assert span["depth"] == by_id[span["parentId"]]["depth"] + 1
    turn_children = {s["kind"] for s in spans if s["parentId"] == root["id"]}
    assert {"lease", "memory.read", "transcript.get", "chat", "tool", "transcript.put", "commit", "job"} <= turn_children

    sections = {s["attributes"]["engram.memory.section"] for s in _by_kind(trace, "memory.read")}
    assert {"agent_memory", "workspace_memory", "user_facts"} <= sections
    assert all(
        s["attributes"]["engram.memory.rows"] >= 0 <= s["attributes"]["engram.memory.tokens"]
        for s in _by_kind(trace, "memory.read")
    )
    chats = [s for s in _by_kind(trace, "chat") if s["parentId"] == root["id"]]
    tools = _by_kind(trace, "tool")
    assert [c["attributes"]["gen_ai.response.finish_reasons"] for c in chats] == [["tool_use"], ["end_turn"]]
    assert sorted(t["attributes"]["gen_ai.tool.name"] for t in tools) == [
        "mcp__market__lookup_price",
        "mcp__market__search_tickets",
    ]
    # the two calls of one answer are siblings that ran together: both start before either ends
    first, second = tools
    assert first["parentId"] == second["parentId"] == root["id"]
    assert max(first["startMs"], second["startMs"]) <= min(first["endMs"], second["endMs"])
    for tool in tools:
        assert tool["attributes"]["engram.tool.connection"] == "market" and tool["attributes"]["engram.tool.outcome"] == "ok"
        assert tool["attributes"]["gen_ai.tool.call.id"].startswith("toolu_") and tool["attributes"]["engram.tool.bytes"] > 0
    # the order of the turn's steps (times are plausible: each starts after the one it waited for)
    lease, get, put, commit = (_one(trace, k) for k in ("lease", "transcript.get", "transcript.put", "commit"))
    assert root["startMs"] <= lease["startMs"] <= lease["endMs"] <= get["startMs"] <= get["endMs"] <= chats[0]["startMs"]
    assert chats[0]["endMs"] <= min(t["startMs"] for t in tools) and max(t["endMs"] for t in tools) <= chats[1]["startMs"]
    assert chats[1]["endMs"] <= put["startMs"] <= put["endMs"] <= commit["startMs"] <= root["endMs"]
    # the summary fold: a job under the turn's root, after its commit, with its own model call
    (fold,) = [s for s in _by_kind(trace, "job") if s["attributes"]["engram.job.kind"] == "summary"]
    assert fold["parentId"] == root["id"] and fold["job"] == "summary" and fold["startMs"] >= commit["startMs"]
    assert fold["attributes"]["engram.job.status"] == "stored"
    (fold_call,) = [s for s in spans if s["parentId"] == fold["id"]]
    assert fold_call["kind"] == "chat" and fold_call["attributes"]["gen_ai.usage.output_tokens"] > 0
    assert fold["startMs"] <= fold_call["startMs"] <= fold_call["endMs"] <= fold["endMs"]


def test_span_attributes_are_named_as_the_conventions_name_them(stack, servers):  # noqa: F811
    agent = acting_agent(stack, connect(stack, servers, "market"))
    r = stack.say(agent["id"], BOTH_TOOLS)
    trace = _trace(stack, r.data["runId"])
    names = {name for span in trace["spans"] for name in span["attributes"]}
    gen_ai = {n for n in names if n.startswith("gen_ai.")}
    assert gen_ai - CONVENTIONS == set()  # no gen_ai.* name the conventions do not define
    assert {n for n in names if not n.startswith(("gen_ai.", "engram.", "error."))} == set()
    chat = _by_kind(trace, "chat")[0]["attributes"]
    for name in (
        gen_ai_attributes.GEN_AI_OPERATION_NAME,
        gen_ai_attributes.GEN_AI_REQUEST_MODEL,
        gen_ai_attributes.GEN_AI_RESPONSE_MODEL,
        gen_ai_attributes.GEN_AI_RESPONSE_FINISH_REASONS,
        gen_ai_attributes.GEN_AI_USAGE_INPUT_TOKENS,
        gen_ai_attributes.GEN_AI_USAGE_OUTPUT_TOKENS,
        gen_ai_attributes.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        gen_ai_attributes.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        gen_ai_attributes.GEN_AI_PROVIDER_NAME,
    ):
        assert name in chat, name
    assert chat["gen_ai.operation.name"] == gen_ai_attributes.GenAiOperationNameValues.CHAT.value
    tool = _by_kind(trace, "tool")[0]["attributes"]
    assert tool["gen_ai.operation.name"] == gen_ai_attributes.GenAiOperationNameValues.EXECUTE_TOOL.value
    assert {gen_ai_attributes.GEN_AI_TOOL_NAME, gen_ai_attributes.GEN_AI_TOOL_CALL_ID} <= set(tool)


def test_no_message_text_tool_input_result_or_secret_in_spans_unless_the_owner_turns_content_on(stack, servers):  # noqa: F811
    agent = acting_agent(stack, connect(stack, servers, "market"))
    message = f"{BOTH_TOOLS}. My key is {SECRET} keep it"
    r = stack.say(agent["id"], message)
    assert r.status == 200, r.body
    text = json.dumps(_trace(stack, r.data["runId"]))
    for said in (message, SECRET, "keep it", '"ETH"', "3412.75", "ENG-104", r.data["reply"][:40]):
        assert said not in text, said
    assert "gen_ai.tool.call.arguments" not in text and "gen_ai.tool.call.result" not in text

    assert stack.call("PATCH", f"/api/agents/{agent['id']}", body={"traceContent": True}).data["traceContent"] is True
    r = stack.say(agent["id"], BOTH_TOOLS)
    trace = _trace(stack, r.data["runId"])
    assert trace["contentCaptured"] is True
    tool = next(s for s in _by_kind(trace, "tool") if s["attributes"]["gen_ai.tool.name"].endswith("lookup_price"))
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"]) == {"symbol": "ETH"}
    assert "3412.75" in tool["attributes"]["gen_ai.tool.call.result"]


def test_another_users_trace_is_a_404_and_bad_ids_a_400(stack):
    agent = stack.agent()
    r = stack.say(agent["id"], "hello there")
    run_id = r.data["runId"]
    assert _trace(stack, run_id)["spans"]
    other = stack.call("GET", f"/api/runs/{run_id}/trace", user="mallory")
    assert other.status == 404 and other.error["code"] == "not_found"
    assert stack.call("GET", "/api/runs/run_missing/trace").status == 404
    assert stack.call("GET", "/api/runs/bad%20id/trace").status == 400
    assert stack.call("GET", f"/api/runs/{run_id}/trace", user=None).status == 401


class _Down:
    name = "offline"

    def complete(self, **_kw: Any) -> Any:
        raise RuntimeError("the model is down")


def test_a_failed_run_keeps_its_trace_with_the_error(stack):
    agent = stack.agent()
    stack.deps.provider_override = _Down()
    r = stack.say(agent["id"], "hello there")
    stack.deps.provider_override = None
    assert r.status >= 500
    (run,) = stack.runs(agent["id"])
    assert run["status"] == "failed"
    trace = _trace(stack, run["id"])
    assert trace["status"] == "failed"
    root, chat = _one(trace, "agent"), _one(trace, "chat")
    assert root["status"] == "error" and root["attributes"]["error.type"] == run["error"]["code"]
    assert chat["status"] == "error" and chat["attributes"]["error.type"] == "RuntimeError"
    assert _one(trace, "commit")["attributes"]["engram.run.status"] == "failed"
    assert _by_kind(trace, "transcript.put") == []  # history untouched


def _trace_items(stack: Any, user: str, agent_id: str) -> list[dict[str, Any]]:
    return stack.deps.table.query_all(keys.agent_pk(tenant_key(user), agent_id), sk_prefix=keys.TRACE_PREFIX)


def test_the_trace_is_exported_with_the_account_and_deleted_with_the_agent(stack):
    agent = stack.agent()
    run_id = stack.say(agent["id"], "hello there").data["runId"]
    exported = stack.call("GET", "/api/me/export").data
    (traces,) = [a["traces"] for a in exported["agents"] if a["id"] == agent["id"]]
    assert [t["runId"] for t in traces] == [run_id] and traces[0]["spans"][0]["kind"] == "agent"
    (item,) = _trace_items(stack, "alice", agent["id"])
    run_item = stack.deps.table.get(keys.tenant_pk(tenant_key("alice")), keys.run_sk(run_id))
    assert item["expiresAt"] == run_item["expiresAt"]  # a chat run expires (RUN_RETENTION_DAYS): its timeline with it

    assert stack.call("DELETE", f"/api/agents/{agent['id']}").status == 200
    assert stack.call("GET", f"/api/runs/{run_id}/trace").status == 404
    assert _trace_items(stack, "alice", agent["id"]) == []


def test_a_tools_memory_write_nests_under_its_tool_call(stack):
    agent = stack.agent()
    r = stack.say(agent["id"], "remember that I prefer green tea")
    assert r.status == 200 and [c["name"] for c in r.data["toolCalls"]] == ["remember"]
    trace = _trace(stack, r.data["runId"])
    tool, write = _one(trace, "tool"), _one(trace, "memory.write")
    assert tool["attributes"]["gen_ai.tool.type"] == "function" and write["parentId"] == tool["id"]
    assert write["attributes"] == {"engram.memory.scope": "user", "engram.memory.operation": "remember"}
    assert tool["startMs"] <= write["startMs"] <= write["endMs"] <= tool["endMs"]
    assert "green tea" not in json.dumps(trace)


def test_a_watched_turns_model_call_says_its_time_to_first_chunk(stack):
    from tests.integration.test_turn_events import watched_turn

    agent = stack.agent()
    _, outcome = watched_turn(stack, agent["id"], "tell me something " + "long " * 40, run_id="run_watched_trace")
    chat = _one(_trace(stack, outcome.run.id), "chat")["attributes"]
    assert chat["gen_ai.request.stream"] is True and chat["gen_ai.response.time_to_first_chunk"] >= 0
    unwatched = _one(_trace(stack, stack.say(agent["id"], "hello").data["runId"]), "chat")["attributes"]
    assert "gen_ai.request.stream" not in unwatched and "gen_ai.response.time_to_first_chunk" not in unwatched


def test_a_queued_run_has_no_timeline_until_it_ends_and_a_clean_slate_run_reads_its_agent_instead_of_a_lease(stack):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "check the weather"})
    assert r.status == 202, r.body
    queued = stack.call("GET", f"/api/runs/{r.data['runId']}/trace")
    assert queued.status == 404 and queued.error["code"] == "trace_not_found"
    stack.drain_runs()
    trace = _trace(stack, r.data["runId"])
    assert trace["kind"] == "manual" and trace["status"] == "succeeded"
    assert _one(trace, "agent")["attributes"]["engram.run.kind"] == "manual"
    assert [s["name"] for s in _by_kind(trace, "lease")] == ["agent.read"]
    assert _by_kind(trace, "transcript.get") == [] and len(_by_kind(trace, "chat")) == 1


def test_deleting_the_account_deletes_its_timelines(stack):
    agent = stack.agent()
    run_id = stack.say(agent["id"], "hello there").data["runId"]
    assert len(_trace_items(stack, "alice", agent["id"])) == 1
    assert stack.call("DELETE", "/api/me").status == 200
    assert _trace_items(stack, "alice", agent["id"]) == []
    assert stack.call("GET", f"/api/runs/{run_id}/trace").status == 404


def test_a_timeline_past_its_size_cap_is_cut_and_says_so(stack, servers):  # noqa: F811
    stack.deps.settings = stack.deps.settings.model_copy(update={"trace_max_bytes": 4_000})
    agent = acting_agent(stack, connect(stack, servers, "market"))
    trace = _trace(stack, stack.say(agent["id"], BOTH_TOOLS).data["runId"])
    assert trace["truncated"] is True and trace["droppedSpans"] > 0
    kept = {s["id"] for s in trace["spans"]}
    assert trace["spans"][0]["kind"] == "agent" and all(s["parentId"] in kept for s in trace["spans"][1:])
    assert len(json.dumps(trace["spans"])) < 4_000 + 1_000
