"""Prompt caching over a 30-turn conversation: how much of each request is the previous one's,
and what the API's cache serves of it.

30 chat turns of one session run through the project's own turn code (`run_chat_turn`, what the
chat route calls; moto in-process, the stores created from template.yaml), with a scheduled
heartbeat in between on the same session (`process_schedule_event`, what HeartbeatFunction
calls; Active Memory on, every 15 minutes). Between turns the jobs on the extraction queue go
where ExtractFunction's handler sends them, with its dependencies: the session summary (CM8) and
extraction. The model is the real AnthropicProvider over a mocked HTTP transport that keeps every
Messages API request body as it would be sent; its scripted replies store agent and workspace
memories (memory_store), add user facts (remember), look things up (memory_recall) and answer in
text; its summaries are a line per user message, its extractions record nothing new.

For each turn it prints: the tokens of its first request; the leading tokens byte-identical to
the previous turn's last request, and that as a share of the previous request ("reuse"); what
the API's cache serves of the first request ("cached", and "hit": its share of the request): the
longest prefix an earlier request's marker wrote that ends at a block end at most 20 blocks
before one of this request's markers (the API's lookback); the turn's input cost at cache prices
(every request: reads 0.1x, 5-minute writes 1.25x, 1-hour writes 2x, the rest 1x) over its
uncached price; and the markers of its first request (token offset and TTL). A request is
serialized in API order (tools, system, messages) as compact JSON without its cache_control
markers (they are not part of the cached content); tokens are estimated at four characters each
(the project's budgets use the same rule). Entries do not expire here (the turns are minutes
apart and each read refreshes an entry).

The summary line checks the aims: reuse >= 90% from the third turn on, at most 4 markers a
request, each marker's prefix at least the model's minimum cacheable length; and it gives, from
the third turn, the overall reuse, the share of all input tokens the cache serves and their cost.
A turn whose history lost its first messages to the history cap (HISTORY_CAP, 50: the history is
then cut to about half of it, never less, see engine.trim.trim_in_steps) can only be served tools,
persona, memory and the running summary's earlier folds (CM8): such turns are marked "cut",
counted apart and listed with their own aim (a hit of at least 60%). Each summary's tokens and
cost are listed.

`--late-summary`: each summary job waits one turn more (the next message came before the worker
was done). `--other`: HISTORY_CAP 36 and 40 turns of another conversation (a row stored on two
turns in three), no heartbeat: one the memory snapshot's rule was not designed with.
`--held-out`: HISTORY_CAP 44 and 60 turns of a third (rows stored in bursts), no heartbeat:
written after the memory added at cuts and the snapshot's share of the budget were chosen; its
first run led to the rule that rows outgrowing their room compete for it.
`--held-out-2`: HISTORY_CAP 40 and 56 turns of a fourth (user facts on one turn in three), no
heartbeat: written before that rule; its first run led to the sections' deeper page
(docs/ARCHITECTURE.md has the figures of each run).
`--long`: 80 turns of the third at the default HISTORY_CAP of 50, long enough for the summary to
be condensed and the session's rows to outgrow their room more than once (issue 33's cuts).
`--handover`: 72 turns of a fifth at the default cap (notes and services in runs, a fact now and
then, lookups, long questions), written for issue 33 before its cut rules were changed and not
used to choose them: the held-out figure of those rules.
`--migration` (90 turns) and `--audit` (84 turns): a sixth and a seventh at the default cap, written
for issue 33's item 8 before its last change; the sixth was played while it was made, the seventh
only before and after it (its held-out figure).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from os.path import commonprefix
from typing import Any

# moto copies a table inside a transaction while the turn's background fact bump writes to it, and
# the bump logs that race as an error: moto's, not the turn's.
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")

from bench.memory_sections import ROOT  # its import puts the core on sys.path and sets a local AWS environment
from engram.engine.prompt import tokens_of as tokens  # the estimate the markers are placed with

MODEL = "claude-sonnet-4-6"
TURNS = 30
HEARTBEAT_AFTER = 15  # the heartbeat runs between this turn and the next
PERSONA = (
    "You are the operations assistant of a small platform team. You keep track of the services the team runs, "
    "their owners, their ports and their on-call rotations, and you answer questions about them precisely. "
    "When someone tells you something durable about a service, store it in workspace memory; when they tell you "
    "something about themselves, remember it as a fact about the user. Prefer short answers with the exact value "
    "asked for, then one sentence of context. Never guess a port or an owner: look it up in memory first, and say "
    "so when you do not know. "
) * 3


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _strip(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


class Request:
    """A request in API order without markers (`text`), the character offset where each of its
    content blocks ends (`ends`), and its markers as (block number, TTL)."""

    def __init__(self, body: dict[str, Any]):
        self.text, self.ends, self.marks = _serialize(body)

    def marked(self) -> list[tuple[int, str]]:
        return [(self.ends[b], ttl) for b, ttl in self.marks]


def _serialize(body: dict[str, Any]) -> tuple[str, list[int], list[tuple[int, str]]]:
    out: list[str] = []
    ends: list[int] = []
    marks: list[tuple[int, str]] = []
    size = 0

    def add(text: str, block: Any = None) -> None:
        nonlocal size
        out.append(text)
        size += len(text)
        if block is not None:
            ends.append(size)
        if isinstance(block, dict) and "cache_control" in block:
            marks.append((len(ends) - 1, block["cache_control"].get("ttl", "5m")))

    add(_compact([_strip(t) for t in body.get("tools", [])]), True)
    for block in body.get("system", []):
        add(_compact(_strip(block)), block)
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        add('{"role":' + _compact(message["role"]) + ',"content":[')
        for i, block in enumerate(blocks):
            if i:
                add(",")
            add(_compact(_strip(block)), block)
        add("]}")
    return "".join(out), ends, marks


LOOKBACK = 20  # blocks the API checks for an earlier entry, back from each marker


class Cache:
    """The API's prompt cache as its docs describe it: a marker writes an entry for the prefix up to
    its block; a later request reads the longest entry that ends at one of its block ends at most
    LOOKBACK blocks before one of its markers (entries never expire here: the turns are minutes
    apart, and each read refreshes the entries a session keeps using)."""

    def __init__(self) -> None:
        self.entries: set[int] = set()

    def send(self, request: Request) -> tuple[int, int, int]:
        """(characters read from the cache, characters written to it, its 1-hour part) for `request`."""
        text, ends = request.text, request.ends
        read = 0
        for block, _ in request.marks:
            for b in range(block, max(-1, block - LOOKBACK - 1), -1):
                if ends[b] > read and hash(text[: ends[b]]) in self.entries:
                    read = ends[b]
                    break
        written = written_1h = 0
        for block, _ in request.marks:
            self.entries.add(hash(text[: ends[block]]))
        if request.marks:
            last = ends[request.marks[-1][0]]
            written = max(0, last - read)
            hour = [ends[b] for b, ttl in request.marks if ttl == "1h"]
            written_1h = max(0, max(hour, default=0) - read)
        return read, written, written_1h


def input_cost(tokens_total: int, read: int, written: int, written_1h: int) -> float:
    """The request's input in units of the uncached input price: a read 0.1x, a 5-minute write
    1.25x, a 1-hour write 2x, the rest (after the last marker) 1x."""
    return 0.1 * read + 1.25 * (written - written_1h) + 2.0 * written_1h + (tokens_total - read - written)


def _strip_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    return {**message, "content": [_strip(b) for b in content] if isinstance(content, list) else content}


class ScriptedClaude:
    """The Messages API as an httpx transport handler: keeps each request, answers from a script."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []  # the summary worker's requests (CM8)
        self._n = 0

    def __call__(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        if (body.get("tool_choice") or {}).get("name") == "record_summary":
            self.summaries.append(body)
            return self._summary(body, request)
        if (body.get("tool_choice") or {}).get("name") == "record_memories":
            return self._extraction(body)
        self.bodies.append(body)
        self._n += 1
        last = body["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        if any(b.get("type") == "tool_result" for b in blocks):
            content = [{"type": "text", "text": "Done: " + "noted and stored. " * 8}]
            stop = "end_turn"
        else:
            said = blocks[0].get("text", "")
            content, stop = self._answer(said)
        usage = {"input_tokens": tokens(len(request.content)), "output_tokens": 40}
        answer = {
            "id": f"msg_{self._n}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if body.get("stream"):  # a watched turn (a session's heartbeat has its watchers) streams
            from tests.fakes.claude import sse

            return sse(answer)
        return httpx2.Response(200, json=answer)

    def _summary(self, body: dict[str, Any], request: Any) -> Any:
        """A summary as a small model writes one: a line for each thing the user said, in its words;
        asked to condense (past 800 tokens), the newer half of the summary's lines, within the
        characters its instructions allow (fewer lines when they are more)."""
        import re

        import httpx2

        prompt = body["messages"][-1]["content"][0]["text"]
        if prompt.startswith("<condense>"):
            summary = [json.loads(line) for line in prompt.split("<summary>\n", 1)[1].rsplit("\n</summary>", 1)[0].split("\n")]
            lines = summary[len(summary) // 2 :]
            allowed = re.search(r"at most (\d+) characters", json.dumps(body.get("system")))
            while allowed and len(lines) > 1 and len("\n".join(lines)) > int(allowed.group(1)):
                lines = lines[1:]
            lines = lines or ["Nothing was said."]
        else:
            # the cut messages as JSON Lines (extraction.prompt.render_transcript): the user's are role user
            transcript = prompt.split("<transcript>\n", 1)[1].rsplit("\n</transcript>", 1)[0].split("\n")
            said = [m["text"] for m in map(json.loads, transcript) if m.get("role") == "user" and "text" in m]
            lines = [f"The user said: {text[:90]}" for text in said] or ["Nothing new was said."]
        block = {"type": "tool_use", "id": f"toolu_s{len(self.summaries)}", "name": "record_summary"}
        content = [{**block, "input": {"summary": "\n".join(lines)}}]
        usage = {"input_tokens": tokens(len(request.content)), "output_tokens": tokens(len(json.dumps(content)))}
        payload = {"id": f"msg_s{len(self.summaries)}", "type": "message", "role": "assistant", "model": body["model"]}
        return httpx2.Response(
            200, json={**payload, "content": content, "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}
        )

    def _extraction(self, body: dict[str, Any]) -> Any:
        """The extraction worker's call: nothing new to record (the chat's tools stored what was said)."""
        import httpx2

        block = {"type": "tool_use", "id": "toolu_x", "name": "record_memories", "input": {"facts": []}}
        payload = {"id": "msg_x", "type": "message", "role": "assistant", "model": body["model"], "content": [block]}
        usage = {"input_tokens": 100, "output_tokens": 10}
        return httpx2.Response(200, json={**payload, "stop_reason": "tool_use", "stop_sequence": None, "usage": usage})

    def _answer(self, said: str) -> tuple[list[dict[str, Any]], str]:
        def use(name: str, tool_input: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
            block = {"type": "tool_use", "id": f"toolu_{self._n:04d}", "name": name, "input": tool_input}
            return [{"type": "text", "text": f"I will use {name}."}, block], "tool_use"

        if said.startswith("Service "):
            name, rest = said.removeprefix("Service ").split(":", 1)
            return use("memory_store", {"key": f"service-{name}", "value": rest.strip(), "scope": "workspace"})
        if said.startswith("About me: "):
            return use("remember", {"fact": said.removeprefix("About me: ")})
        if said.startswith("Note to self: "):
            return use("memory_store", {"key": f"note-{self._n}", "value": said.removeprefix("Note to self: "), "scope": "agent"})
        if said.startswith("Which port"):
            return use("memory_recall", {"query": said.split()[-1].rstrip("?")})
        answer = "Here is what I know: " + ("the service answers on its usual port, owned by the platform team. " * 6)
        return [{"type": "text", "text": answer}], "end_turn"


def script(turns: int = TURNS) -> list[str]:
    lines = []
    for i in range(turns):
        kind = i % 5
        if kind == 0:
            lines.append(f"Service svc{i}: runs on port {8000 + i}, owned by team {i % 3}, on call rotation weekly")
        elif kind == 1:
            lines.append(f"About me: I look after service svc{i - 1} and prefer answers in metric units ({i})")
        elif kind == 2:
            lines.append(f"Which port does svc{i - 2}?")
        elif kind == 3:
            lines.append(f"Note to self: the team asked twice about svc{i - 3}; keep its runbook at hand ({i})")
        else:
            lines.append(f"Summarise what you know about svc{i - 4} and who owns it, in two sentences.")
    return lines


def other_script(turns: int) -> list[str]:
    """A conversation the snapshot rule was not designed with (`--other`): a row stored on two
    turns in three, no user facts, no lookups."""
    lines = []
    for i in range(turns):
        if i % 3 == 0:
            lines.append(f"Service svc{i}: runs on port {8000 + i}, owned by team {i % 4}, paged by the night shift")
        elif i % 3 == 1:
            lines.append(f"Note to self: svc{i - 1} was asked about again; its dashboard moved ({i})")
        else:
            lines.append(f"Summarise what you know about svc{i - 2} and who owns it, in two sentences.")
    return lines


def held_out_script(turns: int) -> list[str]:
    """A third conversation (`--held-out`): rows stored in bursts (four turns in twelve, longer
    values), a user fact, lookups, and long stretches of plain questions."""
    lines = []
    for i in range(turns):
        phase = i % 12
        if phase < 4:
            lines.append(
                f"Service ho{i}: the {['ingest', 'billing', 'search', 'auth'][phase]} worker for region {i % 5}, "
                f"listening on port {9100 + i}, deployed from the release branch every Tuesday, owner team {i % 6}"
            )
        elif phase == 4:
            lines.append(f"About me: I moved to the {['EU', 'US', 'APAC'][i % 3]} rota this month ({i})")
        elif phase in (5, 9):
            lines.append(f"Which port does ho{i - phase}?")
        else:
            lines.append(f"What should I check first if ho{i - phase} starts timing out?")
    return lines


def second_held_out_script(turns: int) -> list[str]:
    """A fourth conversation (`--held-out-2`): facts about the user on one turn in three, a
    service on one in four, a note on one in seven, questions otherwise."""
    lines = []
    for i in range(turns):
        if i % 3 == 0:
            lines.append(
                f"About me: on week {i} I am covering {['payments', 'search', 'storage'][i % 3]} and work from {['Lisbon', 'Oslo', 'Pune', 'Lima'][i % 4]}"
            )
        elif i % 4 == 1:
            lines.append(
                f"Service hb{i}: queue consumer for tenant exports, port {9400 + i}, owner team {i % 5}, alerts to the storage channel"
            )
        elif i % 7 == 2:
            lines.append(f"Note to self: the exports backlog grew again on day {i}; check hb{i - 1} first")
        else:
            lines.append(
                f"Which port does hb{i - (i % 4) + 1}?" if i % 2 else f"Who should I page for hb{i - (i % 4) + 1} tonight?"
            )
    return lines


def handover_script(turns: int) -> list[str]:
    """A fifth conversation (`--handover`), written for issue 33 before the cut rules it measures
    were changed, and not used to choose them: an on-call handover at the default cap, long enough
    for the summary to be condensed; agent notes and workspace services in runs, a fact about the
    user now and then, lookups, and questions of every length between them."""
    clusters = ["ledger", "router", "cache", "mailer", "search", "billing"]
    lines = []
    for i in range(turns):
        cluster = clusters[i % len(clusters)]
        phase = i % 9
        if phase == 0:
            lines.append(
                f"Note to self: incident {i} on the {cluster} cluster was mitigated by draining node {i % 7}; "
                f"the postmortem is owned by team {i % 5} and due on day {i + 3}"
            )
        elif phase in (1, 2):
            lines.append(f"Service hx{i}: {cluster} gateway shard {i % 4}, port {9600 + i}, owner team {i % 5}, pager rota B")
        elif phase == 3:
            lines.append(f"About me: this week I hand over the {cluster} pager at {8 + i % 9}:00 and I am on leave day {i}")
        elif phase == 5:
            lines.append(f"Which port does hx{i - 4}?")
        elif phase == 7:
            lines.append(
                f"Walk me through what changed on the {cluster} cluster since the last handover, what is still open, "
                f"who owns each open item, and what I should check first tomorrow morning before the {cluster} deploy."
            )
        else:
            lines.append(f"Is anything about hx{i - phase + 1} worth flagging in the handover notes?")
    return lines


def migration_script(turns: int) -> list[str]:
    """A sixth conversation (`--migration`), written for issue 33's item 8 before its last change
    and run on the code before it: a database migration planned over a long chat at the default
    cap; rows stored at irregular turns (a step of 7 over 11), a fact about the user on one turn in
    eight, lookups, and questions from a few words to a paragraph."""
    tables = ["orders", "invoices", "accounts", "events", "sessions", "audit", "payouts"]
    lines = []
    for i in range(turns):
        table = tables[i % len(tables)]
        slot = (i * 7) % 11
        if i % 8 == 5:
            lines.append(f"About me: I run the {table} cutover on night {i} and keep the rollback plan in my own notes")
        elif slot in (0, 4):
            lines.append(
                f"Service mg{i}: the {table} replica in zone {i % 3}, port {5400 + i}, lag alarm at {i % 9 + 1} s, "
                f"owner team {i % 4}, migrated in wave {i // 10}"
            )
        elif slot == 7:
            lines.append(f"Note to self: the {table} backfill stalled at batch {i * 13}; resume from the checkpoint")
        elif slot in (2, 9):
            lines.append(f"Which port does mg{i - slot}?")
        elif slot == 5:
            lines.append(
                f"Before we move {table}, list every dependency you know of, which of them writes to it during the "
                f"window, how long the last backfill of {table} took, what the lag alarm says now, and what we should "
                f"announce to the teams that read {table} in the morning, in that order."
            )
        else:
            lines.append(f"Is {table} safe to cut over tonight?")
    return lines


def audit_script(turns: int) -> list[str]:
    """A seventh conversation (`--audit`), written with the sixth and kept aside: not run while
    item 8's change was made, only on the code before it and after it (the held-out figure). A
    security review: findings stored in runs of two or three, user facts in pairs, long and short
    questions alternating."""
    systems = ["vault", "gateway", "ci", "wiki", "crm"]
    lines = []
    for i in range(turns):
        system = systems[(i // 2) % len(systems)]
        phase = i % 10
        if phase in (0, 1, 2) and i % 20 < 10:
            lines.append(
                f"Service au{i}: {system} finding {i}, severity {['low', 'medium', 'high'][i % 3]}, port {6100 + i}, "
                f"fix owner team {i % 6}"
            )
        elif phase in (3, 4) and i % 30 < 15:
            lines.append(f"About me: I sign off the {system} review and I am reachable on channel {i % 4} until day {i + 2}")
        elif phase == 6:
            lines.append(
                f"Give me the state of the {system} review: the findings still open, their owners, which ones block "
                f"the release, and which you would close first."
            )
        elif phase == 8:
            lines.append(f"Note to self: re-test the {system} finding from turn {i - 8} after the patch")
        elif phase % 2:
            lines.append(f"Which port does au{i - phase}?")
        else:
            lines.append(f"Anything new on {system}?")
    return lines


def mcp_server(tools: int) -> Any:
    """A real MCP server (the SDK's MCPServer on loopback) with `tools` tools of realistic size."""
    from mcp.server.mcpserver import MCPServer

    from local.sample_mcp import serve_app

    server = MCPServer("bench-tools")

    def make(i: int) -> Any:
        def tool(query: str, limit: int = 10, since: str = "") -> str:
            return f"result {i} for {query}"

        return tool

    for i in range(tools):
        tool = make(i)
        tool.__name__ = f"lookup_{i:02d}"
        tool.__doc__ = (
            f"Looks up records of kind {i} in the team's internal systems by a free-text query, newest first; "
            "`since` is an ISO date that bounds how far back to search."
        )
        server.add_tool(tool)
    return serve_app(server.streamable_http_app(json_response=True, stateless_http=True))


@dataclass(frozen=True)
class Conversation:
    """A conversation the bench plays: its messages, the HISTORY_CAP it runs under (None: the
    default), whether a heartbeat runs after HEARTBEAT_AFTER turns, and how the report names it."""

    messages: Callable[[], list[str]]
    cap: str | None = None
    heartbeat: bool = False
    label: str = ""


CONVERSATIONS = {
    "main": Conversation(script, heartbeat=True),
    "other": Conversation(lambda: other_script(40), "36", label=", HISTORY_CAP 36"),
    "held-out": Conversation(lambda: held_out_script(60), "44", label=", HISTORY_CAP 44, the held-out conversation"),
    "held-out-2": Conversation(
        lambda: second_held_out_script(56), "40", label=", HISTORY_CAP 40, the second held-out conversation"
    ),
    # Issue 33: 80 turns of the third conversation at the default cap of 50 (its first 60 turns were
    # used to design the cut rules, at another cap; this length and cap were not), and a fifth
    # conversation written before the cut rules and held out from them.
    "long": Conversation(lambda: held_out_script(80), label=", 80 turns of the third conversation at the default cap"),
    "handover": Conversation(lambda: handover_script(72), label=", the handover conversation (held out)"),
    # Issue 33 item 8: two more at the default cap, written before its last change; the seventh was
    # run only before and after it.
    "migration": Conversation(lambda: migration_script(90), label=", the migration conversation"),
    "audit": Conversation(lambda: audit_script(84), label=", the audit conversation (held out)"),
}


def main(mcp_tools: int = 0, *, conversation: str = "main", late_summary: bool = False) -> int:
    """`conversation`: one of CONVERSATIONS; `late_summary`: each summary job waits one turn more
    (the next message came before the worker was done)."""
    played = CONVERSATIONS[conversation]
    import httpx2
    from moto import mock_aws

    from engram.agents.models import Agent, AgentTool, Workspace
    from engram.connections.models import Connection
    from engram.conversations.chat import run_chat_turn
    from engram.conversations.models import Session
    from engram.engine.providers.anthropic_provider import AnthropicProvider
    from engram.facts.models import Fact
    from engram.kernel.ids import tenant_key
    from engram.kernel.model import now_iso
    from engram.kernel.settings import Settings
    from engram.memory.models import Memory
    from engram.roots import chat, extract, heartbeat
    from engram.runs.execution import process_schedule_event
    from local.resources import create_resources
    from local.template import load_template

    try:
        from engram.engine.cache import min_cacheable_tokens
    except ImportError:  # before engine.cache existed: Sonnet 4.6's documented minimum

        def min_cacheable_tokens(model: str) -> int:
            return 2048

    minimum = min_cacheable_tokens(MODEL)
    claude = ScriptedClaude()
    tool_server = mcp_server(mcp_tools) if mcp_tools else None
    with mock_aws():
        resources = create_resources(load_template(ROOT / "template.yaml"))
        env = {**resources.env(), **({"HISTORY_CAP": played.cap} if played.cap else {})}
        settings = Settings.from_env(env).model_copy(update={"anthropic_api_key": "sk-bench"})
        provider = AnthropicProvider(settings, http_client=httpx2.Client(transport=httpx2.MockTransport(claude)))
        deps = chat.build(settings)
        deps.provider_override = provider
        runs = heartbeat.build(settings)
        runs.provider_override = provider
        worker = extract.build(settings)  # ExtractFunction's dependencies
        worker.provider_override = provider
        t = tenant_key("bench")
        now = now_iso()
        grants = []
        if tool_server is not None:
            connection = Connection(id="conn_bench", created_at=now, updated_at=now, name="internal", url=tool_server.url)
            deps.connections.create(t, connection, None, limit=10)
            grants = [AgentTool(connection_id=connection.id)]
        ws = Workspace(id="ws_bench", created_at=now, updated_at=now, name="platform")
        deps.workspaces.put(t, ws)
        agent = Agent(
            id="ag_bench",
            created_at=now,
            updated_at=now,
            name="Ops",
            persona=PERSONA,
            model=MODEL,
            workspace_id=ws.id,
            agent_memory=True,
            active_memory=True,
            schedule="rate(15 minutes)",
            default_prompt="Check on the services you know about and note anything that needs attention.",
            tools=grants,
        )
        dashboard = Session(id="dashboard", agent_id=agent.id, created_at=now, updated_at=now)
        deps.agents.create(
            t, agent, webhook_secret="unused", with_items=[deps.sessions.item(t, dashboard)], max_agents=10, max_scheduled=10
        )
        seed = []
        for i in range(40):
            for scope, owner in (("agent", agent.id), ("workspace", ws.id)):
                m = Memory(
                    id=f"m_{scope}{i}",
                    created_at=now,
                    updated_at=now,
                    key=f"{scope}-seed-{i}",
                    scope=scope,
                    value=f"{scope} note {i}: host {i} serves the legacy API on port {7000 + i}",
                    importance=i % 7,
                )
                seed.append(deps.memories.item(t, m, owner))
        for i in range(6):
            fact = Fact(
                id=f"f_seed{i}", created_at=now, updated_at=now, fact=f"seed fact {i} about the user", last_referenced_at=now
            )
            seed.append(deps.facts.item(t, fact))
        deps.table.batch_write(puts=seed)

        turns: list[tuple[str, list[dict[str, Any]]]] = []
        cuts: list[Any] = []
        held: list[dict[str, Any]] | None = [] if late_summary else None
        for i, message in enumerate(played.messages(), start=1):
            start = len(claude.bodies)
            run_chat_turn(deps, t, agent.id, "dashboard", message)
            turns.append((f"chat {i}", claude.bodies[start:]))
            cuts += _worker(worker, settings, held)  # the extract function between turns (a person types slower)
            if i == HEARTBEAT_AFTER and played.heartbeat:
                start = len(claude.bodies)
                event = {"tenant": t, "agentId": agent.id, "scheduledTime": "2026-06-01T12:15:00Z"}
                outcome = process_schedule_event(runs, event)
                assert outcome.get("status") == "succeeded", outcome
                turns.append(("heartbeat", claude.bodies[start:]))
                cuts += _worker(worker, settings, held)
    if tool_server is not None:
        tool_server.stop()
    offered = sum(1 for spec in turns[-1][1][0].get("tools", []) if str(spec.get("name", "")).startswith("mcp__"))
    label = (f", the agent with {offered} MCP tools" if mcp_tools else "") + played.label
    return report(turns, minimum, cuts, label + (", each summary one turn late" if late_summary else ""))


def _worker(deps: Any, settings: Any, held: list[dict[str, Any]] | None = None) -> list[Any]:
    """ExtractFunction between turns: each job waiting on the extraction queue goes where its
    handler sends it (functions/extract/app.py): a summary job to the summary, the rest to
    extraction (the scripted model records nothing new there). With `held`, a summary job waits
    there until the next call. The summaries' outcomes."""
    import boto3

    from engram.extraction.service import process_extraction_job

    try:
        from engram.conversations.summaries.policy import SUMMARY_JOB
        from engram.conversations.summaries.service import process_summary_job
    except ImportError:  # before the summaries moved under conversations (issue 33)
        from engram.summaries.policy import SUMMARY_JOB  # type: ignore[no-redef]
        from engram.summaries.service import process_summary_job  # type: ignore[no-redef]

    sqs = boto3.client("sqs")
    done = [process_summary_job(deps, job) for job in held or []]
    if held:
        held.clear()
    while True:
        got = sqs.receive_message(QueueUrl=settings.extract_queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return done
        for message in got:
            job = json.loads(message["Body"])
            if job.get("job") == SUMMARY_JOB and held is not None:
                held.append(job)
            elif job.get("job") == SUMMARY_JOB:
                done.append(process_summary_job(deps, job))
            else:
                process_extraction_job(deps, job)
            sqs.delete_message(QueueUrl=settings.extract_queue_url, ReceiptHandle=message["ReceiptHandle"])


def report(
    turns: list[tuple[str, list[dict[str, Any]]]], minimum: int, summaries: list[Any] | None = None, label: str = ""
) -> int:
    chats = sum(1 for name, _ in turns if name.startswith("chat"))
    beats = " and a heartbeat" if len(turns) > chats else ""
    print(f"== prompt cache over {chats} chat turns{beats} (Active Memory on), model {MODEL}{label}")
    print("tokens = characters/4 of the request JSON in API order (tools, system, messages), markers left out;")
    print("reuse = leading tokens identical to the previous turn's last request, as a share of it; cached = what")
    print("the API reads from its cache for the turn's first request (entries its markers wrote before, found within")
    print(f"{LOOKBACK} blocks of one of its markers), hit = that share of the request; cost = the turn's input at cache")
    print(f"prices (read 0.1x, write 1.25x, 1-hour write 2x) / uncached; markers = offset:ttl (minimum {minimum:,} tokens)")
    print(
        f"{'turn':>12} {'calls':>5} {'tokens':>7} {'identical':>9} {'reuse':>6} {'cached':>7} {'hit':>6} {'cost':>5}"
        "  markers of the first request"
    )
    cache = Cache()
    previous: Request | None = None
    worst_reuse, worst_turn, most_marks, short_marks = 100.0, "", 0, 0
    cuts: list[str] = []
    cut_hits: list[float] = []
    same = total = 0  # identical and previous tokens from turn 3 on: the overall reuse
    read_total = input_total = 0  # from turn 3 on, every request: the share read from the cache
    cost_total = 0.0
    head = None
    for n, (name, bodies) in enumerate(turns, start=1):
        requests = [Request(b) for b in bodies]
        first = _compact(_strip_message(bodies[0]["messages"][0]))
        cut = head is not None and first != head
        head = first
        turn_cost = turn_tokens = 0.0
        cached = 0
        for k, request in enumerate(requests):
            most_marks = max(most_marks, len(request.marks))
            short_marks += sum(1 for offset, _ in request.marked() if tokens(offset) < minimum)
            read, written, hour = (tokens(x) for x in cache.send(request))
            size = tokens(len(request.text))
            cached = read if k == 0 else cached
            cost = input_cost(size, read, written, hour)
            turn_cost, turn_tokens = turn_cost + cost, turn_tokens + size
            if n >= 3:
                read_total, input_total, cost_total = read_total + read, input_total + size, cost_total + cost
        text = requests[0].text
        size = tokens(len(text))
        hit = 100.0 * cached / max(1, size)
        identical = reuse = 0
        if previous is not None:
            identical = tokens(len(commonprefix([previous.text, text])))
            reuse = 100.0 * identical / max(1, tokens(len(previous.text)))
            if n >= 3:
                same, total = same + identical, total + tokens(len(previous.text))
            if cut:
                cuts.append(f"{name} {hit:.1f}% ({reuse:.1f}%)")
                cut_hits.append(hit)
            elif n >= 3 and reuse < worst_reuse:
                worst_reuse, worst_turn = reuse, name
        shown = " ".join(f"{tokens(o):,}:{ttl}" for o, ttl in requests[0].marked()) or "-"
        flag = "  (cut)" if cut else ""
        print(
            f"{name:>12} {len(bodies):>5} {size:>7,} {identical:>9,} {reuse:>5.1f}% {cached:>7,} {hit:>5.1f}%"
            f" {turn_cost / max(1.0, turn_tokens):>5.2f}  {shown}{flag}"
        )
        previous = requests[-1]
    for i, outcome in enumerate(summaries or [], start=1):
        cost = sum(u.cost_usd for u in outcome.usage)
        sent = sum(u.input_tokens for u in outcome.usage)
        print(
            f"  summary {i}: {outcome.folded} cut messages folded, {sent:,} tokens sent, summary {outcome.tokens:,} tokens"
            f"{' (condensed)' if outcome.condensed else ''}, ${cost:.5f}"
        )
    ok = worst_reuse >= 90.0 and most_marks <= 4 and short_marks == 0
    cut_ok = all(r >= 60.0 for r in cut_hits)
    print(
        f"summary: min reuse from turn 3 {worst_reuse:.1f}% ({worst_turn}; aim >= 90%) on the turns the history cap did not "
        f"cut; overall reuse from turn 3 {100.0 * same / max(1, total):.1f}%; from turn 3 the cache serves "
        f"{100.0 * read_total / max(1, input_total):.1f}% of all input tokens, which cost {cost_total / max(1, input_total):.3f}"
        f" of their uncached price; at most {most_marks} markers a request (aim <= 4); {short_marks} markers on a prefix "
        f"under {minimum:,} tokens (aim 0): {'OK' if ok else 'MISSED'}"
    )
    # Not part of the exit status. A cut turn's history is new from its first message: the cache can
    # serve tools, persona, memory and the earlier summary, so its hit is that prefix / its own
    # request, and its reuse of the previous request that prefix / the pre-cut request (the history
    # before the cut is about twice the one after it). The memory block is taken again at a cut when
    # the rows stored since would pass their room before the next one (engine.prompt).
    print(
        f"cut turns, hit (reuse): {', '.join(cuts) or 'none'} (aim: hit >= 60%, tools, persona, memory and the earlier "
        f"summary surviving): {'OK' if cut_ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    played = parser.add_mutually_exclusive_group()
    played.add_argument("--other", action="store_true", help="HISTORY_CAP 36, 40 turns of another conversation")
    played.add_argument("--held-out", action="store_true", help="HISTORY_CAP 44, 60 turns of a third")
    played.add_argument("--held-out-2", action="store_true", help="HISTORY_CAP 40, 56 turns of a fourth")
    played.add_argument("--long", action="store_true", help="80 turns of the third at the default cap")
    played.add_argument("--handover", action="store_true", help="72 turns of a fifth, held out (issue 33)")
    played.add_argument("--migration", action="store_true", help="90 turns of a sixth (issue 33, item 8)")
    played.add_argument("--audit", action="store_true", help="84 turns of a seventh, held out (issue 33, item 8)")
    parser.add_argument("--late-summary", action="store_true", help="each summary job one turn late")
    args = parser.parse_args()
    names = ("other", "held-out", "held-out-2", "long", "handover", "migration", "audit")
    chosen = next((name for name in names if getattr(args, name.replace("-", "_"))), "main")
    # Without tools, then with 20 MCP tools (issue 27: they lead the request, sorted, so reuse holds).
    options: dict[str, Any] = {"conversation": chosen, "late_summary": args.late_summary}
    raise SystemExit(main(**options) | main(mcp_tools=20, **options))
