"""Issue 11, items 2 and 3: one secret detector on every write path, seen from the API.

The transcript keeps what the user typed; nothing derived from it (memory, run memory, a title, a
learning, a log line at INFO) does. Every value here is made up."""

from __future__ import annotations

import base64

import pytest

from local.workers import Workers
from tests.integration.logs import info_log
from tests.integration.test_decision_cards import Scripted

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # the AWS documentation's example
ANTHROPIC = "sk-ant-api03-" + "Xy7Qm2Lp9Rt4Vw8Zb3Nc6Hd1Kf5Gj0Ps"
MISSED_BEFORE = [  # each passed the old filter (issue 11, item 2)
    AWS_SECRET,
    "the password for the prod db is hunter2",
    "the password is swordfish",
    "my passcode is 482913",
    "The user's favourite passcode is 482913.",
    "config " + base64.b64encode(f"ANTHROPIC_API_KEY={ANTHROPIC}".encode()).decode(),
    "key " + " ".join(ANTHROPIC[i : i + 5] for i in range(0, len(ANTHROPIC), 5)),
    "key " + "\u200b".join(ANTHROPIC[i : i + 3] for i in range(0, len(ANTHROPIC), 3)),
    "AKIA IOSF ODNN 7EXA MPLE",
]


# Issue 22, item 1: what still passed before the redesign.
MISSED_IN_ISSUE_22 = [
    "hunter2 is my password",
    "482913 unlocks my phone",
    "correcthorse99, in case you need my login",
    "SMTP_PASSWORD=mailpw2024 in the .env",
    "passcode happens to be 902211",
    "my bank PIN, 4417, is the same as my phone's",
    "my p\u0430ssword is Lilac2020",
    "\u0410KIAIOSFODNN7EXAMPL2",
    "blob " + ANTHROPIC.encode().hex(),
    "redis://:Rd1sPass@cache.internal:6379",
    "postgres://u:p@h/db",
    "MIIEowIBAAKCAQEA1IWbz1db74J50b+BTZF4agJo9oRwdBdAfLftoHdYlHq1mnN6\nM1+QdGpYm4ZW3Wp3p7AvrwBZf5bJ1yT8Zg",
    "card 4111 1111 1111 1111 exp 12/28",
]


@pytest.mark.parametrize("value", MISSED_BEFORE + MISSED_IN_ISSUE_22)
def test_what_passed_the_old_filter_is_refused_on_memory_and_facts(stack, value):
    agent = stack.agent()
    path = f"/api/agents/{agent['id']}/memories"
    r = stack.call("POST", path, body={"key": "creds", "value": value})
    assert r.status == 400 and r.error["code"] == "secret_detected" and r.error["field"] == "value", r.body
    assert value not in r.error["message"]
    f = stack.call("POST", "/api/me/facts", body={"fact": value})
    assert f.status == 400 and f.error["code"] == "secret_detected"
    assert stack.call("GET", path).data["items"] == []


@pytest.mark.parametrize(
    "inputs, field",
    [
        ({"topic": "rates", "db": "the password for the prod db is hunter2"}, "inputs.db"),
        ({"password": "swordfish"}, "inputs.password"),
        ({"config": {"aws": {"secret": AWS_SECRET}}}, "inputs.config"),
        ({"keys": ["fine", ANTHROPIC]}, "inputs.keys"),
    ],
)
def test_a_run_input_holding_a_secret_is_a_400_naming_it_and_nothing_runs(stack, inputs, field):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go", "inputs": inputs})
    assert r.status == 400 and r.error["code"] == "secret_detected" and r.error["field"] == field, r.body
    assert stack.runs(agent["id"]) == []


def test_ordinary_run_inputs_still_run(stack):
    agent = stack.agent()
    run = stack.run_now(agent["id"], prompt="go", inputs={"topic": "password policy", "budget": {"usd": 1000}})
    assert run["status"] == "succeeded", run


def test_a_first_message_holding_a_secret_gets_a_safe_title_and_the_transcript_keeps_it(stack):
    agent = stack.agent()
    message = "hi! the password for the prod db is hunter2, please remember it"
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "ops"})
    assert stack.say(agent["id"], message, session="ops").status == 200
    session = stack.call("GET", f"/api/agents/{agent['id']}/sessions/ops").data
    assert session["title"] == "Untitled session"
    assert session["messages"][0]["content"][0]["text"] == message  # the user's own conversation stays
    listed = stack.call("GET", f"/api/agents/{agent['id']}/sessions").data["items"]
    assert "hunter2" not in str(listed)


def test_a_first_message_without_a_secret_still_names_the_session(stack):
    agent = stack.agent()
    stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "plan"})
    stack.say(agent["id"], "Plan the migration of the billing database to Postgres 16 next week", session="plan")
    title = stack.call("GET", f"/api/agents/{agent['id']}/sessions/plan").data["title"]
    assert title == "Plan the migration of the billing database to Postgres 16 next week"[:60]


def test_a_session_title_holding_a_secret_is_refused(stack):
    agent = stack.agent()
    r = stack.call("POST", f"/api/agents/{agent['id']}/sessions", body={"id": "x", "title": "db pwd: hunter2"})
    assert r.status == 400 and r.error["code"] == "secret_detected" and r.error["field"] == "title"


def test_no_message_text_is_logged_at_info(stack, caplog):
    """Item 3: a turn, its extraction, a refused write and a run log ids, counts and codes, never
    what the user wrote."""
    agent = stack.agent(agentMemory=True)
    marker = "Quokka-Marmalade-Tangerine"
    said = f"{marker} is the codename of the launch. We deploy it on Fridays with `make ship`; the password is hunter2."
    assert stack.say(agent["id"], said).status == 200
    Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)
    stack.call("POST", f"/api/agents/{agent['id']}/memories", body={"key": "k", "value": f"{marker} password: hunter2"})
    assert stack.run_now(agent["id"], prompt=f"Summarise {marker} for the team")["status"] == "succeeded"
    logged = info_log(caplog)
    assert "extraction finished" in logged  # the capture works: the turn's extraction logged at INFO
    assert marker not in logged and "hunter2" not in logged


def test_the_model_cannot_write_a_secret_of_the_turn_into_memory_without_its_keyword(stack):
    """Item 3: the user's message holds a passcode; the model's memory tools may not carry the
    number into memory, a fact or a learning even as 'favourite number'."""
    agent = stack.agent(agentMemory=True)
    number = "The user's favourite number is 482913."
    fake = Scripted(
        [
            ("memory_store", {"value": number, "scope": "agent"}),
            ("remember", {"fact": number}),
            ("memory_store", {"value": "The user prefers tea to coffee.", "scope": "agent"}),
        ]
    )
    stack.deps.provider_override = fake
    assert stack.say(agent["id"], "my passcode is 482913, and I prefer tea to coffee").status == 200
    results = [
        block
        for message in fake.requests[-1]["messages"]  # the whole turn so far
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    errors = [r for r in results if r.get("is_error")]
    assert len(errors) == 2 and all("secret from this conversation" in str(r["content"]) for r in errors)
    stored = stack.call("GET", f"/api/agents/{agent['id']}/memories").data["items"]
    assert [m["value"] for m in stored] == ["The user prefers tea to coffee."]
    assert stack.call("GET", "/api/me/facts").data["items"] == []


@pytest.mark.parametrize("value", ["we use sk-learn for the churn model", "The Password is Courage is on my reading list."])
def test_a_harmless_text_is_stored_alike_by_rest_memory_store_and_remember(stack, value):
    """memory_store refused "we use sk-learn ..." through the key it made of it
    (we-use-sk-learn-for-the-churn-model) while REST and remember stored it."""
    agent = stack.agent(agentMemory=True)
    path = f"/api/agents/{agent['id']}/memories"
    assert stack.call("POST", path, body={"key": "tools", "value": value}).status == 201
    stack.call("DELETE", f"{path}/tools")
    fake = Scripted([("memory_store", {"value": value, "scope": "agent"}), ("remember", {"fact": value})])
    stack.deps.provider_override = fake
    assert stack.say(agent["id"], "note what we use").status == 200
    results = [
        block
        for message in fake.requests[-1]["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(results) == 2 and not [r for r in results if r.get("is_error")], results
    assert value in [m["value"] for m in stack.call("GET", path).data["items"]]
    assert value in [f["fact"] for f in stack.call("GET", "/api/me/facts").data["items"]]
