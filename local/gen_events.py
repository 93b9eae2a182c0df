"""(Re)generate events/: one sample event per trigger in template.yaml, built by the local stack's
own builders, so the samples match what the handlers get locally and in Lambda.

    python -m local.gen_events          # write events/*.json
    python -m local.gen_events --check  # exit 1 when events/ is out of date

Files: `<function>-<method>-<name>.json` per HTTP route (name: the last literal segment, or the
resource named by a trailing `{xId}` parameter), `sqs-<queue>.json` per queue a function consumes
(`sqs-failed-firing.json`: Lambda's destination record of a heartbeat firing that failed),
`<function>-schedule.json` per EventBridge Scheduler target (the Input of a schedule as the
function receives it, context attributes filled in).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .apigw import API_ID, LOCAL_ISSUER, LOCAL_SCOPE, build_http_event
from .resources import ACCOUNT_ID, kebab, physical_name
from .schedules import failure_record, fill_input
from .template import ROOT, HttpRoute, Template, load_template
from .workers import sqs_record

EVENTS_DIR = ROOT / "events"
REGION = "us-east-1"
FIXED_TIME = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
SAMPLE_USER = "alice"

SAMPLE_PATH_VALUES = {
    "agentId": "a1",
    "workspaceId": "w1",
    "sessionId": "dashboard",
    "runId": "r1",
    "memoryId": "m1",
    "factId": "f1",
    "name": "release-call",
}
SAMPLE_BODIES: dict[str, Any] = {
    "POST /api/agents": {"name": "Scout", "persona": "A concise research assistant."},
    "PATCH /api/agents/{agentId}": {"persona": "A concise research assistant who cites sources."},
    "POST /api/workspaces": {"name": "Research", "description": "Market research agents"},
    "PATCH /api/workspaces/{workspaceId}": {"description": "Market and competitor research"},
    "POST /api/agents/{agentId}/sessions": {"id": "planning", "title": "Planning"},
    "POST /api/agents/{agentId}/sessions/{sessionId}/messages": {"message": "hi"},
    "POST /api/agents/{agentId}/webhook": {"message": "hi", "session_id": "dashboard"},
    "POST /api/agents/{agentId}/memories": {
        "key": "deploy-cmd",
        "value": "Deploy with make deploy from the repo root",
        "pinned": True,
        "importance": 80,
    },
    "PATCH /api/agents/{agentId}/memories/{memoryId}": {"value": "Deploy with make deploy"},
    "PATCH /api/agents/{agentId}/memories/{memoryId}/pin": {"pinned": True},
    "POST /api/workspaces/{workspaceId}/memories": {"key": "tech-stack", "value": "Python 3.13 on AWS Lambda"},
    "PATCH /api/workspaces/{workspaceId}/memories/{memoryId}": {"importance": 70},
    "PATCH /api/workspaces/{workspaceId}/memories/{memoryId}/pin": {"pinned": False},
    "POST /api/me/facts": {"fact": "I only drink green tea", "topic": "preference"},
    "POST /api/me/api-keys": {"name": "laptop", "scopes": ["read"]},
    # An MCP client's first request (the handshake era; a JSON-RPC message, not an Engram body).
    "POST /mcp": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sample", "version": "1"}},
    },
    "POST /api/agents/{agentId}/runs": {"prompt": "Check the release board and report blockers.", "inputs": {"ticker": "ACME"}},
    "PATCH /api/runs/{runId}": {"resolutionStatus": "resolved"},
    "POST /api/runs/{runId}/approvals": {"toolUseId": "toolu_01", "decision": "approve", "note": "looks right"},
    "PATCH /api/me/facts/{factId}": {"confidence": "asserted"},
    "PUT /api/card-types/{name}": {
        "description": "A release call.",
        "fields": {
            "verdict": {"type": "enum", "required": True, "enum": ["SHIP", "HOLD"]},
            "why": {"type": "string", "required": True, "maxLength": 120},
            "risk": {"type": "integer", "min": 0, "max": 10},
        },
        "reExaminable": True,
        "reExamineActions": ["KEEP", "REVERT"],
        "summaryFields": ["why"],
    },
}
# Webhook requests are signed by the caller; the sample carries placeholders.
WEBHOOK_HEADERS = {
    "x-engram-timestamp": "1735732800",
    "x-engram-signature": "sha256=<hex HMAC-SHA256 of '<timestamp>.<raw body>' with the agent's webhookSecret>",
}
SAMPLE_SQS: dict[str, dict[str, Any]] = {
    "TurnQueue": {
        "body": {"runId": "r1", "tenant": "t", "agentId": "a1", "sessionId": "dashboard", "message": "hi", "kind": "chat"},
        "group": "t#a1#dashboard",
        "dedup": "r1",
    },
    "ExtractQueue": {"body": {"runId": "r1", "tenant": "t", "agentId": "a1", "sessionId": "dashboard"}},
    "RunQueue": {"body": {"tenant": "t", "runId": "r1", "agentId": "a1", "kind": "manual"}, "sender": "ApiFunction"},
}
# The Input of each function's schedules (engram/runs/schedules.py writes it), before Scheduler
# fills in its context attributes.
SAMPLE_SCHEDULE_INPUTS: dict[str, dict[str, Any]] = {
    "HeartbeatFunction": {
        "source": "engram.schedule",
        "tenant": "t",
        "agentId": "a1",
        "scheduledTime": "<aws.scheduler.scheduled-time>",
        "executionId": "<aws.scheduler.execution-id>",
        "attempt": "<aws.scheduler.attempt-number>",
    }
}
SAMPLE_EXECUTION_ID = "d32c5kddcf5bb8c3"


def route_file_name(spec_short: str, route: HttpRoute) -> str:
    segments = [s for s in route.path.strip("/").split("/") if s and s != "api"]
    last = segments[-1] if segments else "root"
    if last.startswith("{") and not last.strip("{}+").endswith("Id") and len(segments) > 1:
        name = segments[-2].removesuffix("s")  # /card-types/{name} -> card-type
    elif last.startswith("{"):
        name = kebab(last.strip("{}+").removesuffix("Id"))
        if len(segments) > 1 and segments[-2] == name:  # /me/export/{exportId}: /me/export is a route too
            name = f"{name}-id"
    else:
        name = last
    # Nested resources (an agent's or a workspace's memories) are named after their owner too.
    literals = [s for s in segments if not s.startswith("{")]
    if (
        len(literals) > 1
        and literals[0] in ("agents", "workspaces", "runs")
        and literals[1] not in ("sessions", "runs", "webhook")
    ):
        name = (
            f"{literals[0].removesuffix('s')}-{'-'.join(literals[1:])}"
            if not last.startswith("{")
            else f"{literals[0].removesuffix('s')}-{name}"
        )
    if segments and segments[0] == ".well-known":  # RFC 9728's metadata: /.well-known/oauth-protected-resource[/mcp]
        name = "-".join(s.lstrip(".") for s in segments)
    if segments == ["runs"]:  # GET /api/runs (every agent's) beside an agent's /agents/{agentId}/runs
        name = "all-runs"
    return f"{spec_short}-{route.method.lower()}-{name}.json"


def http_event(route: HttpRoute) -> dict[str, Any]:
    path = route.path
    params = {}
    for segment in route.path.strip("/").split("/"):
        if segment.startswith("{"):
            key = segment.strip("{}+")
            params[key] = SAMPLE_PATH_VALUES.get(key, "x1")
            path = path.replace(segment, params[key])
    body = SAMPLE_BODIES.get(route.route_key)
    raw = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
    headers: dict[str, str] = {
        "accept": "application/json",
        "host": f"{API_ID}.execute-api.{REGION}.amazonaws.com",
        "user-agent": "curl/8.5.0",
        "x-amzn-trace-id": "Root=1-67752e40-0123456789abcdef01234567",
        "x-forwarded-for": "203.0.113.10",
        "x-forwarded-port": "443",
        "x-forwarded-proto": "https",
    }
    if raw is not None:
        headers["content-length"] = str(len(raw))
        headers["content-type"] = "application/json"
    claims = None
    if route.path.endswith("/webhook"):
        headers.update(WEBHOOK_HEADERS)
    if not route.auth_none:
        headers["authorization"] = f"Bearer dev-{SAMPLE_USER}"
        claims = {"sub": SAMPLE_USER, "via": "jwt", "iss": LOCAL_ISSUER, "token_use": "access", "scope": LOCAL_SCOPE}
    return build_http_event(
        route.route_key,
        route.method,
        path,
        headers=dict(sorted(headers.items())),
        body=raw,
        path_params=params or None,
        claims=claims,
        source_ip="203.0.113.10",
        request_id="AbCdEfGhIjKlMnO=",
        now=FIXED_TIME,
    )


def dead_letter_queues(template: Template) -> set[str]:
    found = set()
    for res in template.queues().values():
        target = (res.get("Properties", {}).get("RedrivePolicy") or {}).get("deadLetterTargetArn")
        if isinstance(target, dict) and "Fn::GetAtt" in target:
            found.add(target["Fn::GetAtt"][0])
    return found


def sqs_event(template: Template, queue_id: str) -> dict[str, Any]:
    props = template.resources[queue_id].get("Properties", {})
    fifo = bool(props.get("FifoQueue"))
    sample = SAMPLE_SQS.get(queue_id, {"body": {}})
    body = json.dumps(sample["body"], separators=(",", ":"))
    sent = str(int(FIXED_TIME.timestamp() * 1000))
    attributes = {
        "ApproximateReceiveCount": "1",
        "SentTimestamp": sent,
        "SenderId": f"AROAEXAMPLEROLEID:engram-{sample.get('sender', 'ChatFunction')}",
        "ApproximateFirstReceiveTimestamp": str(int(sent) + 12),
    }
    if fifo:
        attributes |= {
            "SequenceNumber": "18891234567890123456",
            "MessageGroupId": sample.get("group", "g1"),
            "MessageDeduplicationId": sample.get("dedup", "d1"),
        }
    name = physical_name("engram", queue_id) + (".fifo" if fifo else "")
    message = {
        "MessageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
        "ReceiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a-sample-receipt-handle",
        "MD5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "Body": body,
        "Attributes": attributes,
    }
    return {"Records": [sqs_record(message, f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}", REGION)]}


def schedule_event(function_id: str) -> Any:
    """What a function gets when one of its schedules fires at FIXED_TIME."""
    group = physical_name("engram", "ScheduleGroup")
    return fill_input(
        json.dumps(SAMPLE_SCHEDULE_INPUTS[function_id], separators=(",", ":")),
        scheduled=FIXED_TIME,
        schedule_arn=f"arn:aws:scheduler:{REGION}:{ACCOUNT_ID}:schedule/{group}/a1",
        execution_id=SAMPLE_EXECUTION_ID,
    )


# Lambda's record of a heartbeat firing that failed after its retries (HeartbeatFunction's
# on-failure destination): the firing as the function got it, and the error it raised.
SAMPLE_SQS["FailedFiringQueue"] = {
    "body": failure_record(
        schedule_event("HeartbeatFunction"),
        ("SessionBusy", "another turn is running on this session"),
        function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:engram-HeartbeatFunction",
        request_id="8f5c7e2a-5b1d-4c1e-9f0a-2d3b4c5d6e7f",
        when=FIXED_TIME,
        attempts=3,
    ),
    "sender": "HeartbeatFunction",
}


def generate(template: Template) -> dict[str, dict[str, Any]]:
    events: dict[str, dict[str, Any]] = {}
    for spec in template.functions():
        for route in spec.routes:
            name = route_file_name(spec.short_name, route)
            if name in events:
                raise ValueError(f"two routes would both write events/{name}; extend route_file_name")
            events[name] = http_event(route)
    consumed = {source.queue_id for source in template.sqs_sources()}
    for queue_id in template.queues():
        if queue_id in consumed and queue_id not in dead_letter_queues(template):
            events[f"sqs-{kebab(queue_id.removesuffix('Queue'))}.json"] = sqs_event(template, queue_id)
    for spec in template.functions():
        if spec.logical_id in SAMPLE_SCHEDULE_INPUTS:
            events[f"{spec.short_name}-schedule.json"] = schedule_event(spec.logical_id)
    return events


def render(event: dict[str, Any]) -> str:
    return json.dumps(event, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.gen_events", description="regenerate events/ from template.yaml")
    parser.add_argument("--check", action="store_true", help="only report whether events/ is up to date")
    parser.add_argument("--out", type=Path, default=EVENTS_DIR)
    args = parser.parse_args(argv)
    events = generate(load_template())
    stale = []
    for name, event in events.items():
        path = args.out / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != render(event):
            stale.append(name)
            if not args.check:
                args.out.mkdir(parents=True, exist_ok=True)
                path.write_text(render(event), encoding="utf-8")
    if args.check:
        for name in stale:
            print(f"out of date: events/{name}", file=sys.stderr)
        return 1 if stale else 0
    print(f"wrote {len(stale)} of {len(events)} event(s) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
