"""Streamed turns (issue 23): Engram's time from receiving a `turn` frame to the first
`text.delta` on the socket, minus the model's own time to its first token; pushes per turn.

The local stack (`start_stack`, its queue workers polling, the WebSocket API on loopback), the
offline model wrapped to wait MODEL_TTFT_S before its first token (a model's time to first token)
and to time that wait. For each of TURNS turns a client sends `turn` on an open socket and times
the first `text.delta` it receives; Engram's part is that time minus the model's (from the model
call to its first piece of text). Median and p95; aim: under 80 ms. It includes the $default
handler (the subscription, the queued run, the SQS send), the queue's delivery to the worker
(locally a long poll that returns with the message), the turn's start (lease, transcript,
sections) and the push; each event is also kept (a DynamoDB put) before it is posted (ST5).
Beside it: events per turn, the largest event in bytes (API Gateway's limit: 128 KB), the load
average (the machine is shared: read the figure with it), and the resume latency: a new socket
sends `resume {runId, afterSeq: 0}` for a finished turn and waits for `resumed` (every kept event
replayed first). The sync turn's overhead: `python -m bench.run` (unchanged: a turn nobody
watches builds no events and the providers do not stream).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "core"), str(ROOT)]

TURNS = 40
MODEL_TTFT_S = 0.05


class TimedModel:
    """The offline model, its first token MODEL_TTFT_S after the call; keeps the time it took."""

    name = "offline"

    def __init__(self, inner: Any):
        self.inner = inner
        self.ttft: list[float] = []

    def complete(self, **kwargs: Any) -> Any:
        started = time.perf_counter()
        on_text = kwargs.pop("on_text", None)
        if on_text is None:
            return self.inner.complete(**kwargs)
        first = True

        def timed(piece: str) -> None:
            nonlocal first
            if first:
                time.sleep(MODEL_TTFT_S)
                self.ttft.append(time.perf_counter() - started)
                first = False
            on_text(piece)

        return self.inner.complete(on_text=timed, **kwargs)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    import urllib.request

    from websockets.sync.client import connect

    from local.stack import start_stack

    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        chat = handle.functions["ChatFunction"]
        model = TimedModel(chat.module().ROOT.deps.provider)
        # Every execution environment of the function (the socket's frame and the worker may overlap).
        chat.prepare(lambda module: setattr(module.ROOT.deps, "provider_override", model))

        def call(method: str, path: str, body: Any = None) -> Any:
            request = urllib.request.Request(handle.url + path, data=json.dumps(body).encode() if body else None, method=method)
            request.add_header("authorization", "Bearer dev-bench")
            request.add_header("content-type", "application/json")
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())["data"]

        agent = call("POST", "/api/agents", {"name": "Bench", "persona": "You help."})
        ticket = call("POST", "/api/stream-tickets")
        overheads, pushes, stages, sizes, run_ids = [], [], [], [], []
        load_before = os.getloadavg()
        with connect(f"{ticket['url']}/?ticket={ticket['ticket']}") as ws:
            for i in range(TURNS + 2):
                frame = {"action": "turn", "agentId": agent["id"], "sessionId": "dashboard", "clientTurnId": f"b{i}"}
                frame["message"] = f"turn {i}: " + "tell me more " * 40
                sent = time.perf_counter()
                ws.send(json.dumps(frame))
                first = queued = started = None
                count = 0
                while True:
                    raw = ws.recv(timeout=60)
                    event = json.loads(raw)
                    sizes.append(len(raw.encode() if isinstance(raw, str) else raw))
                    if event.get("seq"):
                        count += 1
                    if event["type"] == "turn.queued":
                        queued = time.perf_counter() - sent
                        run_ids.append(event["runId"])
                    if event["type"] == "turn.started":
                        started = time.perf_counter() - sent
                    if event["type"] == "text.delta" and first is None:
                        first = time.perf_counter() - sent
                    if event["type"] in ("turn.completed", "turn.failed"):
                        break
                if i >= 2:  # the first turns warm the containers' clients
                    overheads.append((first or 0) - model.ttft[-1])
                    stages.append(((queued or 0), (started or 0)))
                    pushes.append(count)
        load_after = os.getloadavg()
        resumes = []
        for run_id in run_ids[2:12]:
            ticket = call("POST", "/api/stream-tickets")
            with connect(f"{ticket['url']}/?ticket={ticket['ticket']}") as ws:
                sent = time.perf_counter()
                ws.send(json.dumps({"action": "resume", "runId": run_id, "afterSeq": 0}))
                while json.loads(ws.recv(timeout=60))["type"] != "resumed":
                    pass
                resumes.append((time.perf_counter() - sent) * 1000)
    finally:
        handle.stop()
    ms = [o * 1000 for o in overheads]
    print("== streamed turns over the local WebSocket API (offline model, first token after 50 ms)")
    print(f"turns measured                      {len(ms)}")
    print(
        f"turn frame -> first text.delta, minus the model's time to first token: median {statistics.median(ms):.1f} ms, p95 {_percentile(ms, 0.95):.1f} ms (aim < 80 ms)"
    )
    print(
        f"  of which: the frame's answer (turn.queued) median {statistics.median(q for q, _ in stages) * 1000:.1f} ms, "
        f"turn.started median {statistics.median(t for _, t in stages) * 1000:.1f} ms"
    )
    print(
        f"pushes per turn (events posted)     median {statistics.median(pushes):.0f}, max {max(pushes)} (a reply of ~500 characters)"
    )
    print(f"bytes per event                     max {max(sizes)} (API Gateway's limit 131072)")
    print(
        f"resume of a finished turn (replayed, then resumed): median {statistics.median(resumes):.1f} ms, max {max(resumes):.1f} ms"
    )
    print(load_line(load_before, load_after))
    return 0


def load_line(before: tuple[float, float, float], after: tuple[float, float, float]) -> str:
    """The machine's load around a measurement (it is shared: read the figures with it)."""
    shown = [", ".join(f"{x:.2f}" for x in load) for load in (before, after)]
    return f"load average (1, 5, 15 min) before {shown[0]}; after {shown[1]} on {os.cpu_count()} cores"


if __name__ == "__main__":
    sys.exit(main())
