"""Schema fuzzing: schemathesis generates requests from docs/openapi.yaml and sends them to the local
stack over real HTTP on loopback; no response may be a 5xx, and every response must match the
status codes and schemas the document gives for its operation.

Every operation is fuzzed, positive and negative data, with a fixed dev user. Path parameters are
either generated (so unknown and malformed ids are sent) or real ids of resources made for the
run (so the routes reach their logic): the choice is Hypothesis's, per parameter. DELETE routes get
a resource of their own each time, so the shared ones stay for the other operations; DELETE
/api/me erases a user of its own, filled first. The webhook is signed when it names the real
agent (else it is a 401, as it should be). The stateful test follows the document's links
(create, then read, change, use and delete what was created).

`make test` runs a bounded, deterministic version (Hypothesis `derandomize`): a few hundred
requests. `make fuzz` runs the same tests longer, with more examples per operation
(FUZZ_EXAMPLES), schemathesis's coverage phase (boundary and type-confusion cases for every
parameter and field), more stateful scenarios (FUZZ_SCENARIOS) and no fixed seed (FUZZ_SEED
fixes one).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis.core.failures import Failure, FailureGroup

from engram.conversations.webhooks import sign
from local.stack import start_stack

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "openapi.yaml"

LONG = os.environ.get("FUZZ_LONG") == "1"  # make fuzz
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50" if LONG else "4"))  # per operation
SCENARIOS = int(os.environ.get("FUZZ_SCENARIOS", "100" if LONG else "6"))
STEPS = 10  # at most, per scenario
# make test: Hypothesis derandomized (the same requests every run); make fuzz: a new seed each run,
# printed so a failure can be replayed (FUZZ_SEED=...).
SEED: int | None = int(os.environ["FUZZ_SEED"]) if os.environ.get("FUZZ_SEED") else None
if LONG and SEED is None:
    SEED = random.randrange(2**32)

USER = "fuzzer"
ERASER = "fuzz-eraser"  # DELETE /api/me erases its caller: it gets a user of its own
REAL = "real-id"  # a generated path parameter this test replaces with the id of a real resource

# No 5xx; status code, content type and body as documented for the operation. Not run: the checks
# of whether a request *should* have been accepted (positive_data_acceptance and its kin): the
# document states some limits in prose only (trimmed lengths, FACT_MIN_CHARS, tokens the list
# issued), so a schema-valid request can rightly get a 400.
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance")
CONFIG = schemathesis.Config.from_dict(
    {
        "headers": {"Authorization": f"Bearer dev-{USER}"},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        "phases": {
            "examples": {"enabled": True},
            "fuzzing": {"enabled": True},
            # Boundary values and type confusion for every parameter and field: hundreds of cases
            # per run, so only in `make fuzz`. Its requests with methods a path does not have leave
            # out TRACE, and only TRACE: the local front (local/stack.py serves GET, POST, PUT,
            # PATCH, DELETE, OPTIONS and HEAD) answers it with http.server's own 501 HTML page,
            # where API Gateway answers 404; the API's code never sees the request.
            "coverage": {
                "enabled": LONG,
                "unexpected-methods": ["GET", "PUT", "POST", "DELETE", "OPTIONS", "PATCH"],
            },
            "stateful": {"enabled": True},
        },
        "request-timeout": 60,
        **({"seed": SEED} if SEED is not None else {}),
    }
)
schema = schemathesis.openapi.from_path(SPEC, config=CONFIG)

SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=SEED is None,
    deadline=None,
    database=None,
    # A failure is reported as found: shrinking it against a live stack would send hundreds more requests.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)

SENT: list[str] = []  # every request of this module, for the summary line
STATUSES: defaultdict[str, Counter[str]] = defaultdict(Counter)  # per fuzzed operation: status and error code
FAILURES: list[str] = []  # every failed check, with the request


# --------------------------------------------------------------------------- the stack and its data
class World:
    """The local stack, a client for it, and the resources the fuzzed requests may name."""

    def __init__(self, url: str):
        self.url = url
        self.http = requests.Session()
        self.ids: dict[str, str] = {}
        self.secret = ""
        self.started = time.monotonic()

    def call(self, method: str, path: str, body: Any = None, *, user: str = USER) -> dict[str, Any]:
        SENT.append(f"{method} {path}")
        response = self.http.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer dev-{user}"},
            timeout=60,
        )
        assert response.status_code < 300, (method, path, response.status_code, response.text)
        return response.json()["data"]

    def wait_for_run(self, run_id: str) -> dict[str, Any]:
        for _ in range(300):
            run = self.call("GET", f"/api/runs/{run_id}")
            if run["status"] in ("succeeded", "failed"):
                return run
            time.sleep(0.05)
        raise AssertionError(f"run {run_id} did not finish")

    def setup(self) -> None:
        workspace = self.call("POST", "/api/workspaces", {"name": "Fuzz", "description": "fuzzed"})
        self.call(
            "PUT",
            "/api/card-types/fuzz-card",
            {"fields": {"decision": {"type": "enum", "enum": ["GO", "WAIT"], "required": True}}, "reExaminable": True},
        )
        agent = self.call(
            "POST",
            "/api/agents",
            {
                "name": "Fuzzed",
                "persona": "Be brief.",
                "workspaceId": workspace["id"],
                "agentMemory": True,
                "defaultPrompt": "Decide.",
                "cardType": "decision",
            },
        )
        self.secret = agent["webhookSecret"]
        session = self.call("POST", f"/api/agents/{agent['id']}/sessions", {"id": "fuzz", "title": "fuzzed"})
        self.call("POST", f"/api/agents/{agent['id']}/sessions/fuzz/messages", {"message": "remember that I like tea"})
        run = self.wait_for_run(self.call("POST", f"/api/agents/{agent['id']}/runs", {"inputs": {"asset": "BTC"}})["runId"])
        assert run["status"] == "succeeded" and run["result"]["card"], run  # re-examinable
        agent_memory = self.call("POST", f"/api/agents/{agent['id']}/memories", {"key": "deploy", "value": "make deploy"})
        workspace_memory = self.call("POST", f"/api/workspaces/{workspace['id']}/memories", {"key": "db", "value": "Postgres"})
        self.ids = {
            "agentId": agent["id"],
            "workspaceId": workspace["id"],
            "sessionId": session["id"],
            "runId": run["id"],
            "agentMemoryId": agent_memory["id"],
            "workspaceMemoryId": workspace_memory["id"],
            "factId": self.call("POST", "/api/me/facts", {"fact": "I work on billing"})["id"],
            "name": "fuzz-card",
            "exportId": self.call("POST", "/api/me/export")["exportId"],
            # a tool server nobody listens on: testing it answers `unreachable` at once, no network
            "connectionId": self.fresh_connection(),
            "keyId": self.fresh_key(),
            "toolUseId": next((c["toolUseId"] for c in run.get("toolCalls", []) if c.get("toolUseId")), "toolu_none"),
        }

    # --- a resource of its own for each DELETE
    def fresh_agent(self) -> str:
        return str(self.call("POST", "/api/agents", {"name": "Doomed", "workspaceId": self.ids["workspaceId"]})["id"])

    def fresh_workspace(self) -> str:
        return str(self.call("POST", "/api/workspaces", {"name": "Doomed"})["id"])

    def fresh_session(self) -> str:
        return str(self.call("POST", f"/api/agents/{self.ids['agentId']}/sessions", {})["id"])

    def fresh_memory(self, owner: str) -> str:
        key = f"doomed-{len(SENT)}"
        return str(self.call("POST", f"/api/{owner}/memories", {"key": key, "value": "to be deleted"})["id"])

    def fresh_connection(self) -> str:
        body = {"name": f"conn-{len(SENT)}", "url": "http://127.0.0.1:9/mcp", "timeoutSeconds": 1}
        return str(self.call("POST", "/api/connections", body)["id"])

    def fresh_key(self) -> str:
        return str(self.call("POST", "/api/me/api-keys", {"name": f"key-{len(SENT)}"})["id"])

    def fresh_fact(self) -> str:
        return str(self.call("POST", "/api/me/facts", {"fact": f"fact number {len(SENT)}"})["id"])

    def fill_eraser(self) -> None:
        workspace = self.call("POST", "/api/workspaces", {"name": "Gone"}, user=ERASER)
        agent = self.call("POST", "/api/agents", {"name": "Gone", "workspaceId": workspace["id"]}, user=ERASER)
        self.call("POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", {"message": "hello"}, user=ERASER)
        self.call("POST", "/api/me/facts", {"fact": "I will be erased"}, user=ERASER)

    def resolve(self, operation_id: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
        """The path parameters with every REAL one replaced by a real id for this operation."""
        out = dict(params)
        real = {name for name, value in params.items() if value == REAL}
        for name in real:
            if name == "memoryId":
                out[name] = self.ids["workspaceMemoryId" if path.startswith("/api/workspaces") else "agentMemoryId"]
            else:
                out[name] = self.ids[name]
        # DELETEs take a resource of their own (under the shared parent when the parent is real)
        if operation_id == "deleteAgent" and "agentId" in real:
            out["agentId"] = self.fresh_agent()
        elif operation_id == "deleteWorkspace" and "workspaceId" in real:
            out["workspaceId"] = self.fresh_workspace()
        elif operation_id == "deleteSession" and real == {"agentId", "sessionId"}:
            out["sessionId"] = self.fresh_session()
        elif operation_id == "deleteAgentMemory" and real == {"agentId", "memoryId"}:
            out["memoryId"] = self.fresh_memory(f"agents/{self.ids['agentId']}")
        elif operation_id == "deleteWorkspaceMemory" and real == {"workspaceId", "memoryId"}:
            out["memoryId"] = self.fresh_memory(f"workspaces/{self.ids['workspaceId']}")
        elif operation_id == "deleteConnection" and "connectionId" in real:
            out["connectionId"] = self.fresh_connection()
        elif operation_id == "deleteApiKey" and "keyId" in real:
            out["keyId"] = self.fresh_key()
        elif operation_id == "archiveFact" and "factId" in real:
            out["factId"] = self.fresh_fact()
        return out


@pytest.fixture(scope="module")
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        world = World(handle.url.rstrip("/"))
        world.setup()
        schema.config.update(base_url=world.url)
        yield world
        report(request, time.monotonic() - world.started)
    finally:
        handle.stop()


def report(request: pytest.FixtureRequest, elapsed: float) -> None:
    """The request count (and in make fuzz, the seed and every operation's statuses and error codes)."""
    lines = [f"fuzz: {len(SENT)} requests in {elapsed:.1f} s" + (f" (FUZZ_SEED={SEED})" if SEED is not None else "")]
    lines += [f"failed check: {failure}" for failure in FAILURES]
    lines += [
        f"  {label}: " + ", ".join(f"{code} x{n}" for code, n in sorted(counts.items()))
        for label, counts in sorted(STATUSES.items())
    ]
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if LONG and capture is not None:
        with capture.global_and_fixture_disabled():  # make fuzz shows it, pass or fail
            print("\n" + "\n".join(lines))
    else:
        print("\n" + "\n".join(lines))  # make test: shown with -s


# --------------------------------------------------------------------------- real ids in generated requests
@schema.hook
def flatmap_path_parameters(context: schemathesis.HookContext, path_parameters: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Each path parameter: the generated value, or a real id (swapped in when the case is sent)."""
    if not path_parameters:
        return st.just(path_parameters)
    return st.fixed_dictionaries({name: st.sampled_from([REAL, value]) for name, value in path_parameters.items()})


REFERENCES = ("workspaceId", "cardType", "team")  # agent fields that must name something that exists


@schema.hook
def flatmap_body(context: schemathesis.HookContext, body: Any) -> st.SearchStrategy[Any]:
    """An agent body as generated, or with the references it names made real (a generated
    `cardType`, `workspaceId` or `team` is almost never an existing one: a 404)."""
    op = context.operation.definition.raw.get("operationId") if context.operation else None
    if op not in ("createAgent", "updateAgent") or not isinstance(body, dict) or not set(REFERENCES) & set(body):
        return st.just(body)
    return st.sampled_from([body, {k: REAL if k in REFERENCES else v for k, v in body.items()}])


def operation_id(case: schemathesis.Case) -> str:
    return str(case.operation.definition.raw.get("operationId", case.operation.label))


def prepare(world: World, case: schemathesis.Case) -> dict[str, str]:
    """Swap the REAL placeholders for ids; the headers the case is sent with on top of the config's."""
    op = operation_id(case)
    if isinstance(case.path_parameters, dict) and REAL in case.path_parameters.values():
        case.path_parameters = world.resolve(op, case.operation.path, case.path_parameters)
    if isinstance(case.body, dict) and REAL in case.body.values():
        real = {"workspaceId": world.ids["workspaceId"], "cardType": world.ids["name"], "team": [world.ids["agentId"]]}
        case.body = {k: real[k] if v == REAL else v for k, v in case.body.items()}
    if op == "deleteMe":
        world.fill_eraser()
        return {"Authorization": f"Bearer dev-{ERASER}"}
    return {}


def record(label: str, response: Any) -> None:
    SENT.append(label)
    try:
        code = response.json().get("error", {}).get("code") or ""
    except (ValueError, AttributeError):
        code = ""
    STATUSES[label][f"{response.status_code} {code}".strip()] += 1


def validate(case: schemathesis.Case, response: Any, **kwargs: Any) -> None:
    """The checks; a failure is also kept for the report (a replay against the live stack may not
    reproduce it, and Hypothesis would then report only that it is flaky)."""
    try:
        case.validate_response(response, **kwargs)
    except (Failure, FailureGroup) as err:
        FAILURES.append(f"{case.operation.label}: {err}\n  {case.as_curl_command(headers=kwargs.get('headers'))}")
        raise


def send(world: World, case: schemathesis.Case) -> None:
    headers = prepare(world, case)
    if operation_id(case) == "postWebhook" and case.path_parameters.get("agentId") == world.ids["agentId"]:
        response = signed_webhook(world, case)
        record(case.operation.label + " (signed)", response)
        validate(case, response)
        return
    response = case.call(base_url=world.url, session=world.http, headers=headers or None)
    record(case.operation.label, response)
    validate(case, response, headers=headers or None)


def signed_webhook(world: World, case: schemathesis.Case) -> requests.Response:
    """The webhook as its caller sends it: signed over the exact body bytes, with a fresh timestamp."""
    kwargs = case.as_transport_kwargs(base_url=world.url)
    names = ("method", "url", "headers", "params", "data", "json")
    prepared = requests.Request(**{name: kwargs[name] for name in names if name in kwargs}).prepare()
    raw = prepared.body or b""
    timestamp = str(int(time.time()))
    prepared.headers["X-Engram-Timestamp"] = timestamp
    prepared.headers["X-Engram-Signature"] = sign(world.secret, timestamp, raw.decode() if isinstance(raw, bytes) else raw)
    return world.http.send(prepared, timeout=60)


# --------------------------------------------------------------------------- the tests
@schema.parametrize()
@SETTINGS
def test_every_operation(case: schemathesis.Case, world: World) -> None:
    send(world, case)


def test_stateful_links(world: World) -> None:
    """Scenarios along the document's links: an agent is created (with generated fields), then its
    sessions, chat, runs, memories or decisions are used, changed or deleted; the same for
    workspaces, memory rows, facts, card types and runs."""

    class Workflow(schema.as_state_machine()):
        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"base_url": world.url, "session": world.http, "headers": prepare(world, case) or None}

        def after_call(self, response: Any, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            record(f"{case.operation.label} (stateful)", response)

        def validate_response(self, response: Any, case: schemathesis.Case, *args: Any, **kwargs: Any) -> None:
            # Kept, not raised: which steps a scenario can take depends on what the stack answered
            # before, so Hypothesis replaying a failed scenario would take other steps.
            try:
                super().validate_response(response, case, *args, **kwargs)
            except (Failure, FailureGroup) as err:
                FAILURES.append(f"{case.operation.label} (stateful): {err}\n  {case.as_curl_command()}")

    if SEED is not None:
        Workflow = hypothesis.seed(SEED)(Workflow)
    before = len(FAILURES)
    Workflow.run(settings=settings(SETTINGS, max_examples=SCENARIOS, stateful_step_count=STEPS))
    assert not FAILURES[before:], "\n\n".join(FAILURES[before:])
    # the links led somewhere: a step used an id an earlier step's response gave it
    followed = [label for label, statuses in STATUSES.items() if label.endswith("(stateful)") and "{" in label]
    assert any(code.startswith("2") for label in followed for code in STATUSES[label]), dict(STATUSES)
