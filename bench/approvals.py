"""Approvals (issue 34, TL10): the time from an owner's decision to the resumed turn's first event.

The local stack (`start_stack`: its queue workers polling, the WebSocket API on loopback), the
sample MCP server (local/sample_mcp.py) and the offline model; an agent whose `lookup_price` waits
for approval. For each of ROUNDS turns a socket sends `turn` ("use lookup_price for BTC") and waits
for `approval.requested`; then the clock starts, the decision goes out (`POST /api/runs/{runId}/
approvals`), and the socket (it watches the session) times the resumed turn's first event
(`approval.decided`) and its `turn.completed`. What it includes: the decision's conditional write
and the resume job's SQS send (in the API's answer), the queue's delivery to the chat worker
(locally a long poll that returns with the message), the run read and the claim, the turn's start
(lease, transcript, memory sections, the MCP tool list) and the push; `turn.completed` adds the
tool call and the model's answer (the offline model: no wait of its own). Median and p95; aim:
under 300 ms to the first event. The machine is shared: the load average is printed beside it.
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

ROUNDS = 20
WARM = 2  # the first rounds warm the containers' clients and the tool list


def main() -> int:
    import urllib.request

    from websockets.sync.client import connect

    from bench.streaming import _percentile, load_line
    from local.sample_mcp import start
    from local.stack import start_stack

    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    sample = start()
    answers, firsts, completes = [], [], []
    try:

        def call(method: str, path: str, body: Any = None) -> Any:
            request = urllib.request.Request(handle.url + path, data=json.dumps(body).encode() if body else None, method=method)
            request.add_header("authorization", "Bearer dev-bench-approvals")
            request.add_header("content-type", "application/json")
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())["data"]

        connection = call("POST", "/api/connections", {"name": "market", "url": sample.url})
        grant = {"connectionId": connection["id"], "requireApproval": ["lookup_price"]}
        agent = call("POST", "/api/agents", {"name": "Bench", "persona": "You help.", "tools": [grant]})
        ticket = call("POST", "/api/stream-tickets")
        load_before = os.getloadavg()
        with connect(f"{ticket['url']}/?ticket={ticket['ticket']}") as ws:
            for i in range(ROUNDS + WARM):
                frame = {"action": "turn", "agentId": agent["id"], "sessionId": "dashboard", "clientTurnId": f"a{i}"}
                ws.send(json.dumps({**frame, "message": "use lookup_price for BTC"}))
                while True:
                    event = json.loads(ws.recv(timeout=60))
                    if event["type"] == "approval.requested":
                        break
                held = event["pendingApprovals"][0]
                run_id = event["runId"]
                decided = time.perf_counter()
                call("POST", f"/api/runs/{run_id}/approvals", {"toolUseId": held["toolUseId"], "decision": "approve"})
                answered = time.perf_counter()
                first = None
                while True:
                    event = json.loads(ws.recv(timeout=60))
                    if event.get("runId") != run_id or not event.get("seq"):
                        continue
                    if first is None:
                        first = time.perf_counter()
                    if event["type"] in ("turn.completed", "turn.failed"):
                        break
                done = time.perf_counter()
                if i >= WARM:
                    answers.append((answered - decided) * 1000)
                    firsts.append(((first or done) - decided) * 1000)
                    completes.append((done - decided) * 1000)
        load_after = os.getloadavg()
    finally:
        sample.stop()
        handle.stop()
    print("== approvals over the local stack (offline model, sample MCP server, the socket watching the session)")
    print(f"rounds measured                                   {len(firsts)}")
    print(
        f"decision POST answered                            median {statistics.median(answers):.1f} ms, p95 {_percentile(answers, 0.95):.1f} ms"
    )
    print(
        f"decision -> the resumed turn's first event        median {statistics.median(firsts):.1f} ms, "
        f"p95 {_percentile(firsts, 0.95):.1f} ms (aim < 300 ms)"
    )
    print(
        f"decision -> turn.completed (the tool call, the answer) median {statistics.median(completes):.1f} ms, "
        f"p95 {_percentile(completes, 0.95):.1f} ms"
    )
    print(load_line(load_before, load_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
