"""Issue 39, item 4: the issue's corpus (tests/unit/data/secrets/i39_*.json) through every write path
as a user meets it: REST memory, a fact, a run's inputs, and the model's memory_store (judged on the
text, not on the key it derives from it). Each path catches 90% of each part's secrets and refuses
at most 2 in 60 look-alikes; a summary fold of chat lines holding secrets keeps its lines with the
secrets redacted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_decision_cards import Scripted

CORPUS_DIR = Path(__file__).parents[1] / "unit" / "data" / "secrets"
PARTS = {part: json.loads((CORPUS_DIR / f"i39_{part}.json").read_text()) for part in ("dev", "heldout")}


def _refused(r: Any) -> bool:
    assert r.status in (200, 201, 202, 400), r.body
    if r.status == 400:
        assert r.error["code"] == "secret_detected", r.body
    return r.status == 400


def _tool_refused(stack: Any, agent_id: str, text: str) -> bool:
    fake = Scripted([("memory_store", {"value": text, "scope": "agent"})])
    stack.deps.provider_override = fake
    assert stack.say(agent_id, "please note this").status == 200
    last = fake.requests[-1]["messages"][-1]  # this turn's one tool result
    assert last["role"] == "user" and last["content"][0]["type"] == "tool_result", last
    return bool(last["content"][0].get("is_error"))


@pytest.mark.parametrize("part", list(PARTS))
def test_every_write_path_catches_90_percent_and_refuses_at_most_2_in_60_look_alikes(stack, part, capsys):
    corpus = PARTS[part]
    agent = stack.agent(agentMemory=True)
    paths = {
        "memory": lambda i, t: _refused(
            stack.call("POST", f"/api/agents/{agent['id']}/memories", body={"key": f"k{i}", "value": t})
        ),
        "fact": lambda i, t: _refused(stack.call("POST", "/api/me/facts", body={"fact": t})),
        "run input": lambda i, t: _refused(
            stack.call("POST", f"/api/agents/{agent['id']}/runs", body={"prompt": "go", "inputs": {"note": t}})
        ),
        "memory_store": lambda i, t: _tool_refused(stack, agent["id"], t),
    }
    for name, refused in paths.items():
        caught = sum(refused(i, s["text"]) for i, s in enumerate(corpus["secrets"]))
        flagged = [n["text"] for i, n in enumerate(corpus["lookalikes"], 1000) if refused(i, n["text"])]
        recall = caught / len(corpus["secrets"])
        with capsys.disabled():
            print(f"\n{part} {name}: recall {recall:.3f}, {len(flagged)} of {len(corpus['lookalikes'])} look-alikes refused")
        assert recall >= 0.9, (name, recall)
        assert len(flagged) / len(corpus["lookalikes"]) <= 2 / 60, (name, flagged)


@pytest.mark.parametrize(
    "note",
    [
        "The password policy is strict: 12 characters, one symbol.",  # its slug: the-password-policy-is-strict-12-...
        "The user resets their password every 90 days.",
        "The token count is 2048 for this model.",
        "Credentials are rotated every 30 days by the platform team.",
    ],
)
def test_memory_store_judges_the_text_not_the_key_it_derives(stack, note):
    """The key memory_store derives from a note (a slug) joins its words into something the detector
    reads as "password-...-12": the note is stored, as REST and remember store it."""
    agent = stack.agent(agentMemory=True)
    assert not _tool_refused(stack, agent["id"], note)
    assert note in [m["value"] for m in stack.call("GET", f"/api/agents/{agent['id']}/memories").data["items"]]


def test_a_summary_fold_keeps_its_lines_with_the_secrets_typed_in_chat_redacted(stack):
    """A card number with its CVV, a password and an AWS key id typed in chat reached the running
    summary, and so every later prompt and the export. The fold is kept, each secret redacted."""
    from local.workers import Workers

    stack.deps.settings = stack.deps.settings.model_copy(update={"history_cap": 4})
    agent = stack.agent()
    typed = [
        "My card is 4111 1111 1111 1111 with cvv 123, book the flight to Lisbon.",
        "The password for the office wifi is Gr33nTea!42 and the printer is on floor 3.",
        "Our deploy key id is AKIAUACM4YUSYW4I71EL for the billing account.",
        "Moje hasło do banku to Kwiatek#2023 i lubię herbatę.",
    ]
    fake = Scripted([])
    stack.deps.provider_override = None
    for i in range(12):
        assert stack.say(agent["id"], typed[i % len(typed)] if i < len(typed) else f"Note {i}: the colour is c{i}.").status == 200
        Workers(stack.functions, stack.resources, retry_delay=0).drain("ExtractQueue", timeout=60)
    session = stack.call("GET", f"/api/agents/{agent['id']}/sessions/dashboard").data
    summary = session["summary"]["text"]
    assert "book the flight to Lisbon" in summary and "[redacted]" in summary  # the lines stay
    for secret in ("4111", "cvv 123", "Gr33nTea", "AKIAUACM4YUSYW4I71EL", "Kwiatek#2023"):
        assert secret not in summary, secret
    stack.deps.provider_override = fake
    assert stack.say(agent["id"], "what did I ask you to book?").status == 200
    prompt = json.dumps(fake.requests[-1]["system"])
    assert "Lisbon" in prompt and "Gr33nTea" not in prompt and "AKIAUACM4YUSYW4I71EL" not in prompt
