"""The `engram` command: log in, list agents, facts, memories, runs and usage, and chat with an
agent over the WebSocket API, its text arriving as it is written. Only argparse and the config are
imported at start; the client (httpx2, websockets) is imported when a command needs it, and `chat`
shows its prompt first and connects while you type."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import config

if TYPE_CHECKING:
    from .client import Client
    from .models import Agent, TurnPaused, TurnResult
    from .streaming import Stream

DEFAULT_URL = "http://127.0.0.1:3000"
PROMPT = "you> "


class CliError(Exception):
    """A message for the person, and the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def _client(args: argparse.Namespace) -> Client:
    settings = config.resolve()
    if not settings.url or not settings.api_key:
        raise CliError(f"not logged in: run `engram login`, or set {config.ENV_URL} and {config.ENV_KEY}", 2)
    from .client import Client

    return Client(settings.url, settings.api_key, timeout=args.timeout)


# --- output ---------------------------------------------------------------------------------------


def _emit_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str], empty: str) -> None:
    if not rows:
        print(empty)
        return
    cells = [[("" if c is None else str(c)).replace("\n", " ") for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _short(text: str | None, width: int = 60) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def _when(stamp: str | None) -> str:
    return (stamp or "")[:19].replace("T", " ")


def _take(items: Iterable[Any], limit: int | None) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if limit is not None and len(out) >= limit:
            break
        out.append(item)
    return out


# --- lookups ----------------------------------------------------------------------------------------


def find_agent(client: Client, ref: str) -> Agent:
    """An agent by id, else by name (case-insensitive; a name two agents share is refused)."""
    from .errors import BadRequestError, NotFoundError

    try:
        return client.get_agent(ref)
    except (NotFoundError, BadRequestError):
        pass
    named = [a for a in client.iter_agents(limit=100) if a["name"].casefold() == ref.casefold()]
    if len(named) == 1:
        return named[0]
    if named:
        raise CliError(f"{len(named)} agents are named {ref!r}: use an id ({', '.join(a['id'] for a in named)})")
    raise CliError(f"no agent {ref!r} (see `engram agents`)")


def find_workspace(client: Client, ref: str) -> str:
    from .errors import BadRequestError, NotFoundError

    try:
        return client.get_workspace(ref)["id"]
    except (NotFoundError, BadRequestError):
        pass
    named = [w["id"] for w in client.iter_workspaces(limit=100) if w["name"].casefold() == ref.casefold()]
    if len(named) == 1:
        return named[0]
    raise CliError(f"no workspace {ref!r}" if not named else f"{len(named)} workspaces are named {ref!r}: use an id")


# --- commands ---------------------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace) -> int:
    url = args.url or _ask(f"Engram URL [{config.read_config().get('url') or DEFAULT_URL}]: ")
    url = (url or config.read_config().get("url") or DEFAULT_URL).rstrip("/")
    key = _read_key(args.key)
    if not key:
        raise CliError("no key given")
    from .client import Client

    with Client(url, key, timeout=args.timeout, retries=1) as client:
        count = len(client.list_agents(limit=100)["items"])  # proves the URL and the key before storing them
    path = config.write_config(url, key)
    print(f"Logged in to {url} ({count} agent{'s' if count != 1 else ''}). Saved to {path}.")
    if os.environ.get(config.ENV_URL) or os.environ.get(config.ENV_KEY):
        print(f"Note: {config.ENV_URL} / {config.ENV_KEY} in the environment take precedence over it.")
    return 0


def _read_key(source: str | None) -> str:
    """The key from the prompt (not echoed), from standard input (`--key -`) or from a file
    (`--key PATH`): never from the command line itself, where `ps` and the shell's history show it."""
    if source is None:
        if not sys.stdin.isatty():  # piped: `pass show engram | engram login`
            return sys.stdin.readline().strip()
        import getpass

        return getpass.getpass("API key (egk_..., or dev-<user> locally): ").strip()
    if source == "-":
        return sys.stdin.readline().strip()
    if source.startswith(("egk_", "dev-")):
        raise CliError("--key takes a file holding the key, or - for standard input, not the key itself (ps would show it)")
    try:
        with open(source, encoding="utf-8") as file:
            return file.readline().strip()
    except OSError as err:
        raise CliError(f"cannot read the key from {source}: {err.strerror}") from None


def _ask(prompt: str) -> str:
    try:
        return input(prompt).strip()
    except EOFError:
        return ""


def cmd_logout(args: argparse.Namespace) -> int:
    print("Logged out." if config.remove_config() else "Not logged in.")
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
    with _client(args) as client:
        agents = list(client.iter_agents(limit=100))
    if args.json:
        _emit_json(agents)
        return 0
    rows = [(a["id"], a["name"], a["model"], a["schedule"] or "", "on" if a["activeMemory"] else "") for a in agents]
    _table(rows, ["ID", "NAME", "MODEL", "SCHEDULE", "ACTIVE MEMORY"], "No agents yet.")
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    with _client(args) as client:
        facts = list(client.iter_facts(include_archived=args.all or None, limit=100))
    if args.json:
        _emit_json(facts)
        return 0
    rows = [
        (f["id"], f["fact"], f["topic"] or "", f["confidence"], f["source"], "archived" if f["archivedAt"] else "") for f in facts
    ]
    _table(rows, ["ID", "FACT", "TOPIC", "CONFIDENCE", "SOURCE", ""], "No facts about you yet.")
    return 0


def cmd_memories(args: argparse.Namespace) -> int:
    if bool(args.agent) == bool(args.workspace):
        raise CliError("name an agent (engram memories AGENT) or a workspace (--workspace WS)", 2)
    with _client(args) as client:
        if args.workspace:
            owner = find_workspace(client, args.workspace)
            rows_in = client.iter_workspace_memories(owner, include_archived=args.all or None, limit=100)
        else:
            owner = find_agent(client, args.agent)["id"]
            rows_in = client.iter_agent_memories(owner, include_archived=args.all or None, limit=100)
        memories = list(rows_in)
    if args.json:
        _emit_json(memories)
        return 0
    rows = [
        (m["key"], _short(m["value"]), m["category"], m["source"], "yes" if m["pinned"] else "", m["importance"])
        for m in memories
    ]
    _table(rows, ["KEY", "VALUE", "CATEGORY", "SOURCE", "PINNED", "IMPORTANCE"], "No memories.")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    with _client(args) as client:
        agent = find_agent(client, args.agent)
        runs = _take(client.iter_runs(agent["id"], limit=min(args.limit, 100)), args.limit)
    if args.json:
        _emit_json(runs)
        return 0
    rows = [
        (r["id"], r["kind"], r["trigger"], r["status"], _when(r["startedAt"] or r["createdAt"]), f"${r['usage']['costUsd']:.4f}")
        for r in runs
    ]
    _table(rows, ["ID", "KIND", "TRIGGER", "STATUS", "STARTED", "COST"], f"No runs for {agent['name']} yet.")
    return 0


def cmd_approvals(args: argparse.Namespace) -> int:
    """TL10: the tool calls your agents wait for you to approve, and your decisions on them."""
    with _client(args) as client:
        if args.action in ("approve", "deny"):
            if not args.run or not args.tool_use:
                raise SystemExit(f"engram approvals {args.action} RUN_ID TOOL_USE_ID [--note TEXT]")
            run = client.decide_approval(args.run, args.tool_use, args.action, args.note)
            if args.json:
                _emit_json(run)
            else:
                left = sum(1 for p in run["pendingApprovals"] if "decision" not in p)
                then = f"{left} more to decide" if left else "the run resumes now"
                print(f"{'Approved' if args.action == 'approve' else 'Denied'} {args.tool_use} of {run['id']}; {then}.")
            return 0
        runs = _take(client.iter_waiting(limit=min(args.limit, 100)), args.limit)
    waiting = [(r, p) for r in runs for p in r["pendingApprovals"] if "decision" not in p]
    if args.json:
        _emit_json([{"runId": r["id"], "agentId": r["agentId"], **p} for r, p in waiting])
        return 0
    rows = [
        (r["id"], p["toolUseId"], p["name"], _short(json.dumps(p["input"], ensure_ascii=False), 50), _when(p["expiresAt"]))
        for r, p in waiting
    ]
    _table(rows, ["RUN", "TOOL USE", "TOOL", "INPUT", "EXPIRES"], "Nothing waits for your approval.")
    return 0


def _connection_auth(c: dict[str, Any]) -> str:
    oauth = c.get("oauth")
    if oauth:
        return "oauth: connected" if oauth["status"] == "authorized" else "oauth: needs authorization"
    return f"header {c['authHeaderName']}" if c.get("hasAuth") else ""


def find_connection(client: Client, ref: str) -> dict[str, Any]:
    """A connection by id, or by its name."""
    from .errors import BadRequestError, NotFoundError

    try:
        return dict(client.get_connection(ref))
    except (NotFoundError, BadRequestError):
        pass
    named = [dict(c) for c in client.iter_connections(limit=100) if c["name"] == ref]
    if not named:
        raise CliError(f"no tool server {ref!r}")
    return named[0]


def cmd_connections(args: argparse.Namespace) -> int:
    """Lists the tool servers, or (`authorize CONN`) prints the URL that grants an OAuth one."""
    with _client(args) as client:
        if args.action == "authorize":
            if not args.connection:
                raise CliError("name the tool server: engram connections authorize CONNECTION", 2)
            connection = find_connection(client, args.connection)
            if not connection.get("oauth"):
                raise CliError(f"{connection['name']} authorises with a header, not OAuth", 2)
            started = client.start_connection_authorization(connection["id"])
            if args.json:
                _emit_json(started)
            else:
                print(f"Open this URL in a browser to connect {connection['name']} (valid until {started['expiresAt']}):")
                print(started["authorizationUrl"])
            return 0
        connections = list(client.iter_connections(limit=100))
    if args.json:
        _emit_json(connections)
        return 0
    rows = [(c["id"], c["name"], c["url"], _connection_auth(dict(c))) for c in connections]
    _table(rows, ["ID", "NAME", "URL", "AUTH"], "No tool servers yet.")
    return 0


def _money(value: float) -> str:
    return f"${value:,.4f}"


def _print_breakdown(b: Mapping[str, Any]) -> None:
    """The usage totals of the range: per day (days that cost something), model, kind, agent."""
    t = b["totals"]
    print(
        f"\n{b['firstDay']} to {b['lastDay']}: {_money(t['costUsd'])}, {t['inputTokens']:,} input and "
        f"{t['outputTokens']:,} output tokens, {t['toolCalls']:,} tool calls; the prompt cache saved {_money(t['cacheSavingsUsd'])}"
    )
    spent = b["spending"]
    limits = spent["limits"]
    day = f" of {_money(limits['dailyCostUsd'])}" if "dailyCostUsd" in limits else ""
    month = f" of {_money(limits['monthlyCostUsd'])}" if "monthlyCostUsd" in limits else ""
    print(f"Spent today {_money(spent['todayUsd'])}{day}, this month {_money(spent['thisMonthUsd'])}{month} (UTC)")
    days = [
        (d["date"], _money(d["costUsd"]), f"{d['inputTokens']:,}", f"{d['outputTokens']:,}")
        for d in b["days"]
        if d["costUsd"] or d["inputTokens"]
    ]
    for title, entries, key in (
        ("BY MODEL", b["models"], "model"),
        ("BY KIND", b["kinds"], "kind"),
        ("BY AGENT", b.get("agents") or [], "agentId"),
    ):
        if entries:
            print()
            _table(
                [
                    (
                        e[key],
                        _money(e["costUsd"]),
                        f"{e['inputTokens']:,}",
                        f"{e['outputTokens']:,}",
                        _money(e["cacheSavingsUsd"]),
                    )
                    for e in entries
                ],
                [title, "COST", "IN", "OUT", "CACHE SAVED"],
                "",
            )
    if days:
        print()
        _table(days, ["DAY", "COST", "IN", "OUT"], "")


def cmd_usage(args: argparse.Namespace) -> int:
    if args.session and not args.agent:
        raise CliError("--session needs --agent", 2)
    with _client(args) as client:
        agent_id = find_agent(client, args.agent)["id"] if args.agent else None
        span = {"from_": args.since, "to": args.until}
        first = client.list_usage(agent_id=agent_id, session_id=args.session, limit=100, **span)
        rows_in, token = list(first["items"]), first["nextToken"]
        while token:
            page = client.list_usage(agent_id=agent_id, session_id=args.session, limit=100, next_token=token, **span)
            rows_in, token = rows_in + page["items"], page["nextToken"]
        totals, breakdown = first["totals"], first.get("breakdown")
    if args.json:
        _emit_json({"items": rows_in, "totals": totals, **({"breakdown": breakdown} if breakdown else {})})
        return 0
    rows = [
        (
            _when(u["createdAt"]),
            u["agentId"],
            u["sessionKey"],
            u["model"],
            u["inputTokens"],
            u["outputTokens"],
            f"${u['costUsd']:.4f}",
        )
        for u in rows_in
    ]
    _table(rows, ["WHEN", "AGENT", "SESSION", "MODEL", "IN", "OUT", "COST"], "No usage yet.")
    print(
        f"Total: {totals['inputTokens']} input, {totals['outputTokens']} output, "
        f"{totals['cacheReadTokens']} cache read, {totals['cacheWriteTokens']} cache write tokens; ${totals['costUsd']:.4f}"
    )
    if breakdown:
        _print_breakdown(breakdown)
    return 0


# --- chat ---------------------------------------------------------------------------------------------


class _Chat:
    """Connects in the background (client import, agent lookup, session, socket) while the person
    types their first line; each line is a turn on the socket, its text printed as it arrives."""

    def __init__(
        self,
        args: argparse.Namespace,
        out: Callable[[str], None],
        on_failure: Callable[[], None] | None = None,
        ask: Callable[[str], str] = input,
    ) -> None:
        self.args = args
        self.out = out
        self.ask = ask  # a y/n question when a turn waits for your approval of a tool call (TL10)
        self.on_failure = on_failure  # the connection failed for good (no such agent, a refused key...)
        self.client: Client | None = None
        self.agent: Agent | None = None
        self.stream: Stream | None = None
        self.error: BaseException | None = None
        self.no_stream: str | None = None  # why turns go over HTTP instead (the socket could not be opened)
        self.turns = 0
        self._ready = threading.Thread(target=self._prepare, name="engram-connect", daemon=True)
        self._ready.start()

    def _prepare(self) -> None:
        try:
            self.client = _client(self.args)
            self.agent = find_agent(self.client, self.args.agent)
            if self.args.session != "dashboard":
                self._ensure_session(self.agent["id"], self.args.session)
            self._open_stream()
        except BaseException as err:
            self.error = err
            if self.on_failure is not None:
                self.on_failure()

    def _open_stream(self) -> None:
        from .errors import EngramError

        assert self.client is not None
        try:
            self.stream = self.client.stream()
        except EngramError as err:  # as the console does: without a socket, turns go over HTTP, whole
            self.stream, self.no_stream = None, str(err)

    def _ensure_session(self, agent_id: str, session_id: str) -> None:
        from .errors import NotFoundError

        assert self.client is not None
        try:
            self.client.get_session(agent_id, session_id)
        except NotFoundError:
            self.client.create_session(agent_id, id=session_id)

    def ready(self) -> None:
        self._ready.join()
        if self.error is not None:
            raise self.error

    def send(self, line: str) -> None:
        self.ready()
        assert self.client is not None and self.agent is not None
        self.turns += 1
        turn_id = f"cli-{os.getpid()}-{threading.get_ident() % 10000}-{self.turns}"
        from .errors import StreamError

        for attempt in (1, 2):
            if self.stream is None and self.no_stream is None:  # once without a socket, the chat stays on HTTP
                self._open_stream()
            if self.stream is None:
                self._send_over_http(line)
                return
            try:
                self._show(self.stream.turn(self.agent["id"], self.args.session, line, client_turn_id=turn_id))
                return
            except StreamError as err:
                if err.code != "connection_closed" or attempt == 2:
                    raise
                # An idle socket closes after 10 minutes: open another and send again (the same clientTurnId runs once).
                self.stream = None

    def _send_over_http(self, line: str) -> None:
        assert self.client is not None and self.agent is not None
        if self.no_stream:
            self.out(f"(no live stream: {self.no_stream}; the reply comes whole over HTTP)\n")
            self.no_stream = ""
        turn = self.client.send_message(self.agent["id"], self.args.session, line)
        for call in turn["toolCalls"]:
            self.out(f"  [tool] {call['name']} " + ("failed" if call.get("isError") else "done") + "\n")
        if turn.get("status") == "awaiting_approval":  # paused for your approval (TL10): decide, then wait
            self._decide(turn["runId"], cast("TurnPaused", turn)["pendingApprovals"])
            self._show_finished(self.client.wait_for_run(turn["runId"])["id"])
            return
        self.out(f"{self.agent['name']}> {cast('TurnResult', turn)['reply']}\n")

    def _decide(self, run_id: str, pending: Sequence[Mapping[str, Any]]) -> None:
        """Asks about each held call in the terminal: y approves, anything else denies (with an
        optional note)."""
        assert self.client is not None
        for held in pending:
            shown = _short(json.dumps(held.get("input") or {}, ensure_ascii=False, separators=(", ", ": ")), 200)
            self.out(f"  [approval] {held['name']} {shown}\n")
            answer = self.ask("  Approve this call? [y/N] ").strip().lower()
            if answer in ("y", "yes"):
                self.client.approve(run_id, held["toolUseId"])
            else:
                note = self.ask("  Why not (a note for the agent, optional)? ").strip()
                self.client.deny(run_id, held["toolUseId"], note or None)

    def _show(self, events: Iterable[Any]) -> None:
        assert self.agent is not None
        name = self.agent["name"]
        at_line_start = True
        started_text = False
        for event in events:
            kind = event["type"]
            if kind == "turn.queued" and event["status"] in ("succeeded", "failed"):
                self._show_finished(event["runId"])  # sent again after a lost socket, and it had run meanwhile
            elif kind == "text.delta":
                if not started_text:
                    self.out(f"{name}> ")
                    started_text = True
                self.out(event["text"])
                at_line_start = event["text"].endswith("\n")
            elif kind in ("tool.started", "tool.finished"):
                if not at_line_start:
                    self.out("\n")
                self.out(_tool_line(event) + "\n")
                at_line_start, started_text = True, False
            elif kind == "turn.completed":
                if not started_text and event["reply"]:
                    self.out(f"{name}> {event['reply']}")
                    at_line_start = False
                self.out("\n" if not at_line_start else "")
            elif kind == "turn.failed":
                err = event.get("error") or {}
                self.out(("\n" if not at_line_start else "") + f"error: {err.get('code')}: {err.get('message')}\n")
            elif kind == "approval.requested" and self.stream is not None:  # TL10: ask, then watch it go on
                self.out("\n" if not at_line_start else "")
                self._decide(event["runId"], event["pendingApprovals"])
                self._show(self.stream.follow(event["runId"], after_seq=event["seq"]))
                return
            elif kind == "approval.decided":
                verdict = "approved" if event["decision"] == "approve" else "denied"
                self.out(f"  [approval] {event['name']} {verdict} by {event['decidedBy']}\n")

    def _show_finished(self, run_id: str) -> None:
        assert self.client is not None and self.agent is not None
        run = self.client.get_run(run_id)
        if run["status"] == "failed":
            err = run["error"] or {}
            self.out(f"error: {err.get('code')}: {err.get('message')}\n")
        else:
            self.out(f"{self.agent['name']}> {(run['result'] or {}).get('reply', '')}\n")

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        if self.client is not None:
            self.client.close()


def _tool_line(event: dict[str, Any]) -> str:
    if event["type"] == "tool.started":
        args = json.dumps(event.get("input") or {}, ensure_ascii=False, separators=(", ", ": "))
        return f"  [tool] {event['name']} {_short(args, 100)}"
    took = f" in {event['durationMs']:.0f} ms" if isinstance(event.get("durationMs"), int | float) else ""
    if event.get("isError"):
        return f"  [tool] {event['name']} failed{took}" + (f": {event['error']}" if event.get("error") else "")
    return f"  [tool] {event['name']} done{took}"


class _FailureInterrupt:
    """Ends the main thread's wait for a line when the connection fails in the background, so a
    wrong agent or key is named at once: a real SIGINT to the main thread interrupts its read
    (interrupt_main alone would not). A signal that lands just before the read blocks only sets
    Python's flag and wakes nothing, so it is sent again until the main thread has taken it. A
    chat started where SIGINT is ignored (from a background job or `nohup`, which pass that on)
    gets Python's own handler while it runs: otherwise the interrupt would never arrive."""

    def __init__(self) -> None:
        import signal

        self.heard = threading.Event()
        self.previous: Any = None  # the SIGINT handler before this chat changed it
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            self.previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def __call__(self) -> None:
        import signal

        for _ in range(100):
            if hasattr(signal, "pthread_kill"):
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            else:  # Windows
                import _thread

                _thread.interrupt_main(signal.SIGINT)
            if self.heard.wait(0.2):
                return

    def taken(self, error: BaseException | None) -> BaseException | None:
        """The connection's failure, on the main thread after an interrupt (None: a person's own
        Ctrl-C); once taken, later interrupts are ignored so a repeat cannot cut its message short."""
        if error is None:
            return None
        import signal

        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.previous = before if self.previous is None else self.previous
        self.heard.set()
        return error

    def restore(self) -> None:
        if self.previous is not None:
            import signal

            signal.signal(signal.SIGINT, self.previous)


def cmd_chat(args: argparse.Namespace) -> int:
    def out(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401  (line editing and history for input())
        except ImportError:
            pass
    print(f"Chat with {args.agent}, session {args.session}. /quit or Ctrl-D leaves.", flush=True)

    interrupt = _FailureInterrupt()
    chat = _Chat(args, out, on_failure=interrupt)
    try:
        while True:
            try:
                line = input(PROMPT).strip()
            except EOFError:
                out("\n")
                return 0
            except KeyboardInterrupt:
                out("\n")
                error = interrupt.taken(chat.error)
                if error is not None:
                    raise error from None
                continue
            if line in ("/quit", "/exit"):
                return 0
            if not line:
                continue
            try:
                chat.send(line)
            except KeyboardInterrupt:
                error = interrupt.taken(chat.error)
                if error is not None:
                    raise error from None
                out("\n(stopped watching; the turn goes on and is kept in the session)\n")
                if chat.stream is not None:
                    chat.stream.close()
                    chat.stream = None
    finally:
        chat.close()
        interrupt.restore()


# --- parser -------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    # --json and --timeout go before or after the command; SUPPRESS keeps a subcommand from
    # resetting what was given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON instead of a table")
    common.add_argument("--timeout", type=float, default=argparse.SUPPRESS, help="seconds per request (default 60)")
    parser = argparse.ArgumentParser(
        prog="engram",
        description="Engram from the command line: your agents, what they remember, and chat.",
        epilog=f"{config.ENV_URL} and {config.ENV_KEY} in the environment take precedence over `engram login`'s file "
        f"({config.config_path()}).",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("login", parents=[common], help="store the stack's URL and your API key")
    p.add_argument("--url", help=f"the stack's URL (default: asked; {DEFAULT_URL} locally)")
    p.add_argument(
        "--key",
        metavar="FILE",
        help="read the API key (egk_..., or dev-<user> locally) from FILE, or from standard input with - "
        "(default: asked, not echoed; never the key itself, which ps would show)",
    )
    p.set_defaults(func=cmd_login)

    p = sub.add_parser("logout", parents=[common], help="forget the stored URL and key")
    p.set_defaults(func=cmd_logout)

    p = sub.add_parser("agents", parents=[common], help="list your agents")
    p.set_defaults(func=cmd_agents)

    p = sub.add_parser("chat", parents=[common], help="chat with an agent, streaming (Ctrl-D or /quit leaves)")
    p.add_argument("agent", help="the agent's id or name")
    p.add_argument("--session", default="dashboard", help="session id (default dashboard; created when missing)")
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("facts", parents=[common], help="what your agents know about you")
    p.add_argument("--all", action="store_true", help="archived facts too")
    p.set_defaults(func=cmd_facts)

    p = sub.add_parser("memories", parents=[common], help="an agent's or a workspace's memory")
    p.add_argument("agent", nargs="?", help="the agent's id or name")
    p.add_argument("--workspace", help="a workspace's id or name instead of an agent")
    p.add_argument("--all", action="store_true", help="archived rows too")
    p.set_defaults(func=cmd_memories)

    p = sub.add_parser("runs", parents=[common], help="an agent's runs, newest first")
    p.add_argument("agent", help="the agent's id or name")
    p.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("approvals", parents=[common], help="tool calls waiting for your approval; approve or deny one")
    p.add_argument("action", nargs="?", choices=["list", "approve", "deny"], default="list")
    p.add_argument("run", nargs="?", help="the run's id (approve, deny)")
    p.add_argument("tool_use", nargs="?", metavar="TOOL_USE_ID", help="the held call's toolUseId (approve, deny)")
    p.add_argument("--note", help="why (a denial's note reaches the agent)")
    p.add_argument("--limit", type=int, default=50, help="how many runs to look at (default 50)")
    p.set_defaults(func=cmd_approvals)

    p = sub.add_parser("connections", parents=[common], help="your tool servers; `authorize CONN` prints an OAuth grant URL")
    p.add_argument("action", nargs="?", choices=["list", "authorize"], default="list")
    p.add_argument("connection", nargs="?", help="the tool server's id or name (for authorize)")
    p.set_defaults(func=cmd_connections)

    p = sub.add_parser("usage", parents=[common], help="tokens and cost, per day, model, kind and agent")
    p.add_argument("--agent", help="only this agent (id or name)")
    p.add_argument("--session", help="only this session of --agent (or memory-extract:<session>)")
    p.add_argument("--from", dest="since", help="first UTC day of the breakdown, YYYY-MM-DD (default: 30 days ago)")
    p.add_argument("--to", dest="until", help="last UTC day of the breakdown, YYYY-MM-DD (default: today)")
    p.set_defaults(func=cmd_usage)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status: int = args.func(args)
        return status
    except CliError as err:
        print(f"engram: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # `engram facts | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as err:
        from .errors import EngramError

        if isinstance(err, EngramError):
            print(f"engram: {err}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
