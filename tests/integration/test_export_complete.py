"""A complete export (CM8, issue 24): everything stored for a user is in their account export.

Generic over what is stored: every item of the table whose partition is the user's, and every
object of the bucket under the user's tenant, is classified by its shape (the partition's kind
and the sort key's prefix; the object key's prefix). A shape must either map to an export record
type, with as many records as stored items, or be listed below as bookkeeping with the reason it
is not the user's data. A new item type (say, MCP connections) fails this test until it is
exported or listed; and no stored value of an attribute named like a secret, a credential or an
encrypted value may appear anywhere in the export.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from engram.kernel.ids import tenant_key
from local.workers import Workers
from tests.mcp_servers import McpServers

# (partition kind, sort-key prefix) -> the export record type that holds it
EXPORTED = {
    ("", "AGENT"): "agent",
    ("", "WS"): "workspace",
    ("", "RUN"): "run",
    ("", "CARDTYPE"): "cardType",
    ("", "CONN"): "connection",
    ("", "APIKEY"): "apiKey",  # (its lookup row, APIKEY#<hash>, is in no tenant partition: the hash alone)
    ("#A#*", "SESSION"): "session",
    ("#A#*", "MEM"): "memory",
    ("#W#*", "MEM"): "memory",
    ("#A#*", "RUNMEM"): "runMemory",
    ("#A#*", "TRACE"): "trace",  # the runs' timelines (OB1): the turn's part and each job's
    ("#A#*", "ARCH"): "archive",
    ("#U", "FACT"): "fact",
    ("#U", "PROFILE"): "profile",
    ("#USAGE", "<time>"): "usage",
    ("#USAGETOTALS", "U"): "usageTotal",
    ("#USAGETOTALS", "A"): "usageTotal",
    ("#USAGETOTALS", "LIMITS"): "usageTotal",
}
# Bookkeeping: not something the user said, stored or asked for, each with its reason.
NOT_USER_DATA = {
    ("", "QUOTA"): "a quota counter (a count of exported rows)",
    ("#A#*", "QUOTA"): "a quota counter",
    ("#W#*", "QUOTA"): "a quota counter",
    ("#U", "QUOTA"): "a quota counter",
    ("#A#*", "EXTRACT"): "an extraction job's marker (its outcome: the rows it wrote are exported)",
    ("#A#*", "DELIVERY"): "a webhook replay guard (a signature digest, expiring)",
    ("#U", "FACTTEXT"): "the facts' duplicate index (a fact id under a digest of its text)",
    ("#A#*", "ARCHDEL"): "a tombstone of a deleted session's archive (expiring)",
    ("", "EXPORT"): "an export job: the export itself",
    ("", "CONNTOOLS"): "a connection's cached tool list (the server's own, listed again from it)",
    ("", "STREAMEVENT"): "a turn's events kept an hour for a socket that resumes (the run and transcript are exported)",
    ("", "ACTIVETURN"): "a queued or running turn's place in the per-user cap (expiring)",
    ("", "APIKEYGONE"): "a revoked key's tombstone (its id, expiring in a day): a resent revocation answers 200",
    ("", "APIKEYREQ"): "an Idempotency-Key's claim of the key it made (expiring in a day)",
}
OBJECTS_EXPORTED = {"state/sessions": "message"}  # object key prefix -> record type of its content
TOOL_RESULTS = "/tool-results/"  # under an agent's sessions: the full results of cut tool calls
OBJECTS_NOT_USER_DATA = {"exports": "export files: the export itself"}
SECRET_NAMES = re.compile(r"secret|encrypt|auth|token|password|credential", re.I)


def _shape(t: str, pk: str, sk: str) -> tuple[str, str]:
    owner = re.sub(r"#([AW])#[^#]+", r"#\1#*", pk[len(t) :])
    kind = "<time>" if sk[:1].isdigit() else sk.split("#", 1)[0]
    return owner, kind


def _stored_items(stack: Any, t: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb")
    items = []
    for page in client.get_paginator("scan").paginate(TableName=stack.deps.settings.table_name):
        for raw in page["Items"]:
            pk = raw["PK"]["S"]
            if pk == t or pk.startswith(f"{t}#"):
                items.append(raw)
    return items


def _stored_objects(stack: Any, t: str) -> list[str]:
    bucket = stack.deps.settings.bucket_name
    keys = []
    for page in stack.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys += [o["Key"] for o in page.get("Contents", []) if f"/{t}/" in o["Key"] or o["Key"].endswith(f"/{t}")]
    return keys


def _export_lines(stack: Any) -> list[dict[str, Any]]:
    started = stack.call("POST", "/api/me/export")
    assert started.status == 202, started.body
    stack.drain_runs()
    job = stack.call("GET", f"/api/me/export/{started.data['exportId']}").data
    assert job["status"] == "succeeded", job
    from engram.aws import keys

    body = stack.s3.get_object(Bucket=stack.deps.settings.bucket_name, Key=keys.export_object(tenant_key("alice"), job["id"]))
    return [json.loads(line) for line in body["Body"].read().decode().splitlines()]


def _a_full_account(stack: Any, servers: McpServers) -> dict[str, Any]:
    """A user with sessions past the cap (and their summaries), runs, a council, facts, memories,
    a card type, a webhook delivery and an earlier export."""
    stack.deps.settings = stack.deps.settings.model_copy(update={"history_cap": 6})
    ws = stack.call("POST", "/api/workspaces", body={"name": "W"}).data
    agent = stack.agent(workspaceId=ws["id"], agentMemory=True)
    for i in range(8):
        assert stack.say(agent["id"], f"Note {i}: our deploy day is Tuesday {i}. I prefer tea.").status == 200
        Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)
    assert stack.say(agent["id"], "remember that I live in Porto").status == 200
    assert stack.say(agent["id"], "note for the team that the build uses Bazel").status == 200
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "notes"})
    assert stack.say(agent["id"], "a second session", session="notes").status == 200
    Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)  # summaries, extraction
    assert stack.call("POST", f"/api/agents/{agent['id']}/memories", body={"key": "k", "value": "v"}).status in (200, 201)
    card = {"description": "A call.", "fields": {"verdict": {"type": "enum", "required": True, "enum": ["SHIP", "HOLD"]}}}
    assert stack.call("PUT", "/api/card-types/release-call", body=card).status == 201
    member = stack.agent(name="Analyst")
    lead = stack.agent(name="Director", team=[member["id"]], defaultPrompt="Decide.")
    assert stack.run_now(lead["id"])["status"] == "succeeded"
    assert stack.webhook(agent["id"], agent["webhookSecret"], {"message": "from a webhook"}).status == 202
    stack.drain_turns()
    assert stack.call("POST", "/api/me/facts", body={"fact": "I like hiking"}).status == 201
    assert stack.call("POST", "/api/me/api-keys", body={"name": "laptop"}).status == 201
    assert stack.call("PATCH", "/api/me", body={"name": "Caroline", "limits": {"monthlyCostUsd": 500}}).status == 200
    # a tool connection (its auth value sealed) and a tool result too long for the model, kept in full
    conn = stack.call(
        "POST",
        "/api/connections",
        body={"name": "faulty", "url": servers.url("faulty"), "authHeader": {"value": "Bearer top-s3cret-value"}},
    ).data
    tooled = stack.agent(name="Tooled", tools=[{"connectionId": conn["id"]}])
    cut = stack.say(tooled["id"], "use huge with 20000")
    assert cut.status == 200 and cut.data["toolCalls"][0]["fullResultKept"] is True
    session = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    assert session["trimmedCount"] > 0 and session["summary"]
    return agent


@pytest.fixture(scope="module")
def servers() -> Iterator[McpServers]:
    running = McpServers.start()
    yield running
    running.running.stop()


def test_the_export_holds_everything_stored_for_the_user(moto_stack, servers):
    stack = moto_stack
    _a_full_account(stack, servers)
    stack.agent(user="bob")
    _export_lines(stack)  # an earlier export: its job and file are stored too
    t = tenant_key("alice")
    lines = _export_lines(stack)
    exported = Counter(line["type"] for line in lines[1:-1])
    text = json.dumps(lines, ensure_ascii=False)

    stored: Counter[str] = Counter()
    unknown: set[tuple[str, str]] = set()
    secrets: list[str] = []
    for raw in _stored_items(stack, t):
        shape = _shape(t, raw["PK"]["S"], raw["SK"]["S"])
        if shape in EXPORTED:
            stored[EXPORTED[shape]] += 1
        elif shape not in NOT_USER_DATA:
            unknown.add(shape)
        # (a header's *name*, e.g. a connection's authHeaderName "Authorization", is no secret value)
        secrets += [
            v["S"]
            for name, v in raw.items()
            if SECRET_NAMES.search(name) and not name.endswith("Name") and "S" in v and len(v["S"]) >= 8
        ]
    assert not unknown, f"stored for the user but neither exported nor listed as bookkeeping: {sorted(unknown)}"
    # every exported type is present in this account, so the comparison covers it
    assert set(stored) == set(EXPORTED.values())
    for kind, count in stored.items():
        assert exported[kind] == count, f"{kind}: {exported[kind]} exported, {count} stored"
    assert secrets and not [s for s in secrets if s in text]  # the webhook secret at least, never exported
    assert "top-s3cret-value" not in text and any(line["type"] == "connection" for line in lines)

    messages = tool_results = 0
    for key in _stored_objects(stack, t):
        prefix = key.split(f"/{t}", 1)[0]
        assert prefix in OBJECTS_EXPORTED or prefix in OBJECTS_NOT_USER_DATA, f"object {key}: unknown prefix"
        if TOOL_RESULTS in key:
            tool_results += 1
        elif OBJECTS_EXPORTED.get(prefix) == "message":
            doc = json.loads(stack.s3.get_object(Bucket=stack.deps.settings.bucket_name, Key=key)["Body"].read())
            messages += len(doc["messages"])
    assert messages and exported["message"] == messages
    assert tool_results and exported["toolResult"] == tool_results
    # the summaries and the cut turns are in it
    sessions = [line["data"] for line in lines if line["type"] == "session"]
    assert any(s["summary"] and "Note 0: our deploy day is Tuesday 0." in s["summary"]["text"] for s in sessions)
    archived = [line["data"]["text"] for line in lines if line["type"] == "archive"]
    assert "Note 0: our deploy day is Tuesday 0. I prefer tea." in archived


def test_a_new_item_type_fails_the_comparison_until_it_is_exported():
    # e.g. a kind of row no feature writes yet, in the tenant partition
    shape = _shape("t1", "t1", "NEWTHING#x_1")
    assert shape not in EXPORTED and shape not in NOT_USER_DATA
    assert SECRET_NAMES.search("authValueEncrypted") and SECRET_NAMES.search("webhookSecret")
