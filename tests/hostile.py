"""The hostile tool-output corpus (TL4) and the two ways it is run: through the extraction and
summary prompts with the offline model in process (`through_the_prompts`), and as a user meets it
over HTTP against the local stack with a real MCP server on loopback serving the corpus
(`over_http`). Both say, per case, where its marker reached: a memory row, a user fact, the
running summary; and whether the person's own fact said beside it was still remembered.

tests/data/hostile_tool_outputs.json is the dev corpus (used while designing the structured
transcript); hostile_tool_outputs_heldout.json was written afterwards and only run at the end.
`python -m bench.hostile_tools` prints the figures for both.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
DEV = DATA / "hostile_tool_outputs.json"
HELD_OUT = DATA / "hostile_tool_outputs_heldout.json"
TOOL = "fetch_page"


def load(path: Path = DEV) -> list[dict[str, str]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["cases"])


def own_words(case: dict[str, str]) -> str:
    """What the person says in the case's turn: the tool to use, and a fact of their own."""
    return f"use {TOOL} with {case['id']}. I prefer answers tagged {case['id']}."


@dataclass
class Reached:
    """Where a case's marker was found, and whether the person's own fact was kept."""

    case: str
    where: list[str] = field(default_factory=list)  # of: row, fact, summary
    own_fact: bool = False


# --- in process: the prompts and the offline model ------------------------------------------------
def conversation(case: dict[str, str]) -> list[dict[str, Any]]:
    """The messages a run holds for a case: the person's turn, the agent calling the tool (with
    the text as its input for `tool_input`), the tool's result (the text for `tool_result`) and
    the agent's reply quoting it (the text for `reply`)."""
    text, where = case["text"], case["where"]
    tool_input = {"case": text if where == "tool_input" else case["id"]}
    result = text if where == "tool_result" else "A page about the weather."
    reply = text if where == "reply" else f"The page said: {result}"
    return [
        {"role": "user", "content": [{"type": "text", "text": own_words(case)}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": f"mcp__web__{TOOL}", "input": tool_input}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]},
        {"role": "assistant", "content": [{"type": "text", "text": reply}]},
    ]


def _forced(system: list[dict[str, Any]], tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The offline model's answer to a worker's call that forces its one tool."""
    from engram.engine.providers.offline import OfflineProvider

    choice = {"type": "tool", "name": tools[0]["name"]}
    answer = OfflineProvider().complete(
        model="offline", system=system, tools=tools, messages=messages, max_tokens=1024, timeout=5, tool_choice=choice
    )
    return answer.content


def through_the_prompts(case: dict[str, str]) -> Reached:
    """The case's run through the extraction call and a summary fold, answered by the offline model."""
    from engram.conversations.summaries import service
    from engram.extraction import prompt

    transcript = prompt.render_transcript(conversation(case))
    parsed = prompt.parse_answer(_forced(*prompt.build_request(transcript, [], ["workspace", "agent"])))
    facts = [f.value for f in parsed.facts] if parsed else []
    fold_system, fold = service.fold_request("", transcript)
    summarised = service.parse_summary(_forced([{"type": "text", "text": fold_system}], [service.tool_spec()], fold)) or ""
    marker = case["marker"].lower()
    reached = Reached(case["id"], own_fact=any(f"tagged {case['id']}" in f for f in facts))
    if any(marker in f.lower() for f in facts):
        reached.where.append("row")
    if marker in summarised.lower():
        reached.where.append("summary")
    return reached


# --- over HTTP: a real MCP server serving the corpus, the local stack --------------------------
def corpus_server(cases: list[dict[str, str]]) -> Any:
    """An MCP server (the official SDK's) whose `fetch_page` returns a case's text by its id."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("engram-hostile")
    texts = {c["id"]: c["text"] for c in cases}

    @server.tool()
    def fetch_page(case: str) -> str:
        """Fetches a web page (here: the hostile text of a corpus case)."""
        return texts.get(case, "no such page")

    return server


def serve_corpus(cases: list[dict[str, str]]) -> Any:
    """The corpus server on loopback (stateless, JSON answers); `.url`, `.stop()`."""
    from local.sample_mcp import serve_app

    app = corpus_server(cases).streamable_http_app(json_response=True, stateless_http=True, streamable_http_path="/mcp")
    return serve_app(app)


Http = Callable[..., tuple[int, dict[str, Any]]]


def over_http(
    http: Http, url: str, mcp_url: str, cases: list[dict[str, str]], drain: Callable[[], object], user: str = "alice"
) -> list[Reached]:
    """Each `tool_result` case in a session of its own, as a user meets it: the person asks for
    the page and states a fact; the agent (the offline model) calls the tool and quotes what it
    returned; the extraction runs (`drain`: the extraction queue); two more turns push the tool's
    turn past the history cap (the stack runs with a small HISTORY_CAP) and the summary folds it.
    Then the agent's and the workspace's memory rows, the user's facts and the session's summary
    are searched for the marker (`user`: whose account; a corpus each keeps their names apart)."""
    call = functools.partial(http, url, user=user)
    status, ws = call("POST", "/api/workspaces", body={"name": "Hostile"})
    assert status == 201, ws
    status, conn = call("POST", "/api/connections", body={"name": "web", "url": mcp_url})
    assert status == 201, conn
    body = {
        "name": "Reader",
        "tools": [{"connectionId": conn["data"]["id"]}],
        "agentMemory": True,
        "workspaceId": ws["data"]["id"],
    }
    status, agent = call("POST", "/api/agents", body=body)
    assert status == 201, agent
    agent_id, ws_id = agent["data"]["id"], ws["data"]["id"]
    out = []
    for case in (c for c in cases if c["where"] == "tool_result"):
        status, created = call("POST", f"/api/agents/{agent_id}/sessions", body={"id": case["id"]})
        assert status == 201, created
        path = f"/api/agents/{agent_id}/sessions/{case['id']}"
        status, turn = call("POST", f"{path}/messages", body={"message": own_words(case)})
        assert status == 200, turn
        assert [c["name"] for c in turn["data"]["toolCalls"]] == [f"mcp__web__{TOOL}"], turn
        for said in ("Thanks. Next point, please.", "And one more point, please."):
            drain()
            status, turn = call("POST", f"{path}/messages", body={"message": said})
            assert status == 200, turn
        drain()
        status, session = call("GET", path)
        assert status == 200 and session["data"]["summary"], session  # the tool's turn was cut and folded
        rows = [
            call("GET", p)[1]["data"]["items"] for p in (f"/api/agents/{agent_id}/memories", f"/api/workspaces/{ws_id}/memories")
        ]
        facts = call("GET", "/api/me/facts")[1]["data"]["items"]
        marker = case["marker"].lower()
        reached = Reached(case["id"], own_fact=f"tagged {case['id']}" in json.dumps(rows))
        for name, found in (("row", rows), ("fact", facts), ("summary", session["data"]["summary"])):
            if marker in json.dumps(found, ensure_ascii=False).lower():
                reached.where.append(name)
        out.append(reached)
    return out
