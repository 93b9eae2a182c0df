"""`make bench` (soak): does `make dev` stay as fast and as small as it starts?

Starts the local stack as `make dev` does (`python -m local.stack`, offline model, its own ports)
in a child process, gives 20 agents memories (10 each, over REST) and their user 10 facts, then
sends 2,000 chat turns over HTTP, round robin over the agents' `dashboard` sessions, one at a
time (the extraction worker runs behind them as in `make dev`). The messages cycle through the
offline model's memory phrasings: facts restated (refreshed, not duplicated), recall, search,
the clock, and lines the extraction worker distils into `auto:` rows. What grows is what a real
user makes grow: sessions to their history cap, runs, usage rows and the conversation archive.

Per window of turns (200 by default) it prints the stack's resident memory (VmRSS of the child),
the bytes moto's backends hold as stored data (DynamoDB items, S3 objects, SQS messages, measured
inside the stack: `local.stack --stats`, local/stats.py), the growth that is not data (RSS growth
minus data growth since the first window), the p50/p95 turn time seen by the client, the errors
and the table's item count. At the end: bytes per stored item of each kind, the AWS operations and
routes whose mean time changed most between the first and the last window (as the handlers' SDK
clients see them, and as moto serves them), the time the stack takes to stop on SIGTERM and a
verdict against the aims: the growth that is not data within 20% of the first window's resident
memory (raw RSS is printed beside it: stored data grows with the turns as it would in DynamoDB),
and the last window's p50 within 1.3x of the first's. Exit status 1 when an aim is missed.
`--tracemalloc` starts the stack with PYTHONTRACEMALLOC=1 (slower) and prints the traced bytes
by origin (moto, botocore, engram, the local stack...) at the first and last window.

    python -m bench.soak [--turns 2000] [--agents 20] [--window 200] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from local.stats import rss_mb as proc_rss_mb

ROOT = Path(__file__).resolve().parents[1]
USER = "soak"
RSS_AIM = 0.20  # resident memory within ±20% of the first window's
P50_AIM = 1.3  # last window's p50 at most 1.3x the first's
MESSAGES = (
    "remember that I prefer green tea",
    "what do you know about me?",
    "We use PostgreSQL 16 for the billing service. I prefer short answers.",
    "did we talk about tea?",
    "what time is it?",
    "Our deploy day is Tuesday; my editor is Helix.",
    "what do you remember about deploys?",
    "hello again, anything new?",
)
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback never goes through a proxy


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int) -> float | None:
    """Resident memory of a process in MB (Linux /proc, else psutil when installed, else None)."""
    found = proc_rss_mb(pid)
    if found is not None:
        return found
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        return None
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


class Client:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None, timeout: float = 120) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("authorization", f"Bearer dev-{USER}")
        if data is not None:
            request.add_header("content-type", "application/json")
        try:
            with _DIRECT.open(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw or b"null")
            except ValueError:
                return err.code, raw.decode("utf-8", "replace")

    def must(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path} -> {status}: {answer}")
        return answer["data"]


class Stack:
    """`python -m local.stack` in a child process, its output in a temporary file."""

    def __init__(self, *, trace: bool = False) -> None:
        self.port, self.moto_port, stream_port = _free_port(), _free_port(), _free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="engram-soak-", suffix=".log", delete=False)  # noqa: SIM115
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "AWS_ENDPOINT_URL")}
        if trace:
            env["PYTHONTRACEMALLOC"] = "4"  # frames per allocation: who called the allocating line
        command = [sys.executable, "-m", "local.stack", "--port", str(self.port), "--moto-port", str(self.moto_port)]
        command += ["--stream-port", str(stream_port), "--sample-mcp-port", "0", "--stats"]
        self.process = subprocess.Popen(
            [*command, "--model-provider", "offline"], cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        client = Client(self.url)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the stack exited with {self.process.returncode}:\n{self.tail()}")
            try:
                if client.call("GET", "/api/agents", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the stack did not answer within {timeout:.0f} s:\n{self.tail()}")

    def rss(self) -> float | None:
        return rss_mb(self.process.pid)

    def stats(self, *, data: bool = True) -> dict[str, Any]:
        """The stack's own figures (`GET /@local/stats`, local/stats.py): RSS, stored data, call timings."""
        status, answer = Client(self.url).call("GET", "/@local/stats" + ("" if data else "?data=0"), timeout=300)
        if status != 200 or not isinstance(answer, dict):
            raise RuntimeError(f"GET /@local/stats -> {status}: {answer}")
        return answer

    def terminate(self, timeout: float = 120) -> float:
        """SIGTERM, then the seconds until the process is gone (SIGKILL past `timeout`)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return time.monotonic() - started

    def tail(self, lines: int = 30) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace")
        return "\n".join(line[:300] for line in text.splitlines()[-lines:])

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()
        os.unlink(self.log.name)


def seed(client: Client, agents: int) -> list[str]:
    """A workspace, `agents` agents (half in the workspace, half with agent memory), 10 memories
    each and 10 facts about the user."""
    workspace = client.must("POST", "/api/workspaces", {"name": "Soak"})["id"]
    ids = []
    for i in range(agents):
        fields: dict[str, Any] = {"name": f"Soak {i:02d}", "persona": "Be brief."}
        fields.update({"workspaceId": workspace} if i % 2 == 0 else {"agentMemory": True})
        agent = client.must("POST", "/api/agents", fields)["id"]
        for m in range(10):
            memory = {"key": f"note-{m}", "value": f"Standing note {m} for agent {i}: keep replies under {m + 3} lines."}
            client.must("POST", f"/api/agents/{agent}/memories", {**memory, "pinned": m == 0})
        ids.append(agent)
    for f in range(10):
        client.must("POST", "/api/me/facts", {"fact": f"I have been to {f + 2} countries on trip number {f}"})
    return ids


def mix(turn: int, agents: int) -> int:
    """The message of `turn`: every agent walks the whole cycle, one step per round over the agents,
    and each round starts one message further, so that any window of a few rounds holds the same mix
    of messages (with a whole round on one message, a window of 100 turns held five of the eight
    and the next window three others: two windows' medians compared different messages)."""
    round_, agent = divmod(turn, agents)
    return (agent + round_) % len(MESSAGES)


def data_bytes(figures: dict[str, Any]) -> int:
    """Bytes of the stored data (the DynamoDB items by kind are a breakdown of `dynamodb_items`)."""
    return sum(kind["bytes"] for name, kind in figures["data"].items() if " " not in name)


def window_calls(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[int, float]]:
    """(count, seconds) of each timed call between two reads of the stack's figures."""
    out = {}
    for name, now in after["calls"].items():
        then = before["calls"].get(name, {"count": 0, "seconds": 0.0})
        count = now["count"] - then["count"]
        if count > 0:
            out[name] = (count, now["seconds"] - then["seconds"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--tracemalloc", action="store_true", help="trace the stack's allocations (slower)")
    args = parser.parse_args(argv)

    print(f"soak: {args.turns} chat turns over {args.agents} agents against `python -m local.stack` (offline model)")
    stack = Stack(trace=args.tracemalloc)
    try:
        stack.wait_ready()
        client = Client(stack.url)
        start_rss = stack.rss()
        agents = seed(client, args.agents)
        seeded = stack.stats()
        print(
            f"stack started: RSS {start_rss or 0:.0f} MB; seeded {len(agents)} agents, 10 memories each, 10 facts:"
            f" RSS {seeded['rss_mb'] or 0:.0f} MB, stored data {data_bytes(seeded) / 2**20:.1f} MB"
        )
        print(
            f"{'turns':>11} {'RSS MB':>8} {'data MB':>8} {'other +MB':>9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}"
            f" {'CPU ms':>7} {'load':>5} {'errors':>6} {'items':>7}"
        )
        windows: list[dict[str, Any]] = []
        latencies: list[float] = []
        errors: dict[str, int] = {}
        previous = seeded
        for turn in range(args.turns):
            agent = agents[turn % len(agents)]
            message = MESSAGES[mix(turn, len(agents))]
            started = time.perf_counter()
            try:
                status, answer = client.call("POST", f"/api/agents/{agent}/sessions/dashboard/messages", {"message": message})
            except OSError as err:  # a reset or a dropped connection: a failed turn, unless the stack is gone
                if stack.process.poll() is not None:
                    raise RuntimeError(f"the stack exited with {stack.process.returncode} at turn {turn + 1}") from err
                status, answer = 0, {"error": {"code": type(err).__name__}}
            latencies.append((time.perf_counter() - started) * 1000)
            if status != 200:
                code = answer.get("error", {}).get("code", "") if isinstance(answer, dict) else ""
                key = f"{status} {code}".strip()
                errors[key] = errors.get(key, 0) + 1
            if len(latencies) == args.window or turn == args.turns - 1:
                figures = stack.stats()
                window = {
                    "turns": f"{turn + 2 - len(latencies)}-{turn + 1}",
                    "count": len(latencies),
                    "rss": figures["rss_mb"],
                    "data_mb": data_bytes(figures) / 2**20,
                    "data": figures["data"],
                    "tracemalloc": figures.get("tracemalloc") or {},
                    "calls": window_calls(previous, figures),
                    "p50": statistics.median(latencies),
                    "p95": percentile(latencies, 95),
                    "max": max(latencies),
                    "errors": sum(errors.values()),
                    "codes": dict(errors),
                    "items": figures["data"]["dynamodb_items"]["count"],
                    # the stack's CPU time per turn (its threads, the extraction worker's too): what
                    # the stack itself spends, apart from waiting for a machine other work shares
                    "cpu_ms": (figures["cpu_s"] - previous["cpu_s"]) * 1000 / len(latencies),
                    "load": os.getloadavg()[0],
                }
                previous = stack.stats(data=False)  # the walk over the data is not a turn's time
                first = windows[0] if windows else window
                window["other_mb"] = (window["rss"] - first["rss"]) - (window["data_mb"] - first["data_mb"])
                windows.append(window)
                print(
                    f"{window['turns']:>11} {window['rss'] or 0:8.0f} {window['data_mb']:8.1f} {window['other_mb']:+9.1f}"
                    f" {window['p50']:8.0f} {window['p95']:8.0f} {window['max']:8.0f} {window['cpu_ms']:7.0f}"
                    f" {window['load']:5.1f} {window['errors']:>6}"
                    f" {window['items']:>7}",
                    flush=True,
                )
                if errors:
                    print(f"{'':>11} failed turns: {errors}", flush=True)
                latencies, errors = [], {}
        stop_s = stack.terminate()
        print(f"SIGTERM -> exit in {stop_s:.1f} s (exit status {stack.process.returncode})")
        report(windows)
        return verdict(windows, stop_s)
    except BaseException:
        print(stack.tail(), file=sys.stderr)
        raise
    finally:
        stack.close()


def report(windows: list[dict[str, Any]]) -> None:
    """Bytes per stored item, the calls whose time per turn changed most, and tracemalloc's origins."""
    first, last = windows[0], windows[-1]
    print("stored data at the end (bytes each, as moto holds it):")
    index = last["data"].get("emulator index") or {"count": 0, "bytes": 0}
    for kind, figures in sorted(last["data"].items(), key=lambda k: (" " in k[0], -k[1]["bytes"])):
        if kind == "emulator index":
            continue
        each = figures["bytes"] / figures["count"] if figures["count"] else 0.0
        expired = f" ({figures['expired']} past their TTL)" if figures.get("expired") else ""
        print(f"  {kind:<24} {figures['count']:>7} x {each:8.0f} B = {figures['bytes'] / 2**20:7.2f} MB{expired}")
    print(
        f"  not data: the emulator's index over {index['count']} items (local/emulator.py)"
        f" {index['bytes'] / 2**20:.2f} MB, {index['bytes'] / max(1, index['count']):.0f} B an item"
    )
    turns = len(windows) and sum(w["count"] for w in windows)
    growth = last["data_mb"] - first["data_mb"]
    other = last["other_mb"]
    span = turns - first["count"]
    if span > 0:
        print(
            f"growth after the first window, per turn: data {growth * 2**20 / span / 1024:.1f} KB,"
            f" not data {other * 2**20 / span / 1024:+.1f} KB"
        )
    print(
        "calls per turn and mean ms, first window -> last window (the 12 with the largest change in ms per turn;"
        " SQS long polls left out: they wait for messages):"
    )
    names = {name for name in set(first["calls"]) | set(last["calls"]) if not name.endswith("ReceiveMessage")}
    ranked = [name for name in names if not name.startswith("python.gc")]

    def per_turn(window: dict[str, Any], name: str) -> tuple[float, float]:
        count, seconds = window["calls"].get(name, (0, 0.0))
        return count / window["count"], (seconds * 1000 / count if count else 0.0)

    def change(name: str) -> float:
        (n0, ms0), (n1, ms1) = per_turn(first, name), per_turn(last, name)
        return abs(n1 * ms1 - n0 * ms0)

    print(f"  {'call':<80} {'per turn':>13} {'mean ms':>17} {'ms per turn':>17}")
    for name in sorted(ranked, key=change, reverse=True)[:12]:
        (n0, ms0), (n1, ms1) = per_turn(first, name), per_turn(last, name)
        print(f"  {name[:80]:<80} {n0:5.2f} -> {n1:5.2f} {ms0:7.1f} -> {ms1:7.1f} {n0 * ms0:7.1f} -> {n1 * ms1:7.1f}")
    collections = sorted(name for name in names if name.startswith("python.gc"))
    for name in collections:
        (n0, ms0), (n1, ms1) = per_turn(first, name), per_turn(last, name)
        print(f"  {name[:80]:<80} {n0:5.2f} -> {n1:5.2f} {ms0:7.1f} -> {ms1:7.1f} {n0 * ms0:7.1f} -> {n1 * ms1:7.1f}")
    if first["tracemalloc"] and last["tracemalloc"]:
        print("tracemalloc, traced MB by origin (first window -> last):")
        origins = first["tracemalloc"]["by_origin"] | last["tracemalloc"]["by_origin"]
        for origin in sorted(origins, key=lambda o: -last["tracemalloc"]["by_origin"].get(o, 0)):
            a, b = first["tracemalloc"]["by_origin"].get(origin, 0), last["tracemalloc"]["by_origin"].get(origin, 0)
            print(f"  {origin:<10} {a / 2**20:7.1f} -> {b / 2**20:7.1f}")
        print(
            "  largest lines at the end: "
            + ", ".join(f"{t['where']} {t['bytes'] / 2**20:.1f} MB" for t in last["tracemalloc"]["top_lines"][:8])
        )
        print("  what grew most during the last window (KB, allocations, where: the allocating line first):")
        for grown in last["tracemalloc"]["growth"][:15]:
            print(f"    {grown['bytes'] / 1024:+9.1f} KB {grown['count']:+7d}  {grown['where']}")


def verdict(windows: list[dict[str, Any]], stop_s: float) -> int:
    first, last = windows[0], windows[-1]
    lines, ok = [], True
    if all(w["rss"] is not None for w in windows) and first["rss"]:
        spread = max(abs(w["other_mb"]) for w in windows) / first["rss"]
        ok &= spread <= RSS_AIM
        lines.append(
            f"RSS {first['rss']:.0f}->{last['rss']:.0f} MB, of which stored data {first['data_mb']:.1f}->{last['data_mb']:.1f} MB;"
            f" growth that is not data at most {spread:.0%} of the first window (aim {RSS_AIM:.0%})"
        )
    else:
        lines.append("RSS not measured (no /proc)")
    ratio = last["p50"] / first["p50"]
    ok &= ratio <= P50_AIM
    lines.append(f"p50 {first['p50']:.0f}->{last['p50']:.0f} ms, x{ratio:.2f} (aim x{P50_AIM})")
    failed = sum(w["errors"] for w in windows)
    ok &= failed == 0
    lines.append(f"{failed} failed turns")
    print(f"verdict: {'PASS' if ok else 'FAIL'}: " + "; ".join(lines) + f"; SIGTERM {stop_s:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
