"""A smoke test of a running Engram stack, as a user walks it: `make smoke URL=... TOKEN=...`.

    python3.13 -m smoke --url "$API_URL" --token "$TOKEN"      # or SMOKE_URL / SMOKE_TOKEN

Against the deployed API (the stack's `ApiUrl` output and an access token of the user pool) or the
local stack (`http://127.0.0.1:3000`, token `dev-<user>`). Python's standard library only, so it
runs without the dev venv. It creates an agent with the built-in `decision` card type, has a
conversation with it (three sync turns, the second "remember that ..."), reads your facts, sends
an asynchronous turn, runs the agent (a manual run and its decision card) and re-examines that
run (its conviction card), polling each queued run to its end. Then it deletes what it created:
the agent (with its sessions and runs) and the facts its conversation stored (a deleted fact is
archived, as `DELETE /api/me/facts/{factId}` does). It never deletes the account.

Every step prints its latency; the last line is PASS or FAIL, and a failure names the step, the
request, its status and the error envelope (exit status 1; 2 for bad arguments). Replies are not
compared word for word: with the offline model (a turn that costs nothing and answers
"(offline model) ...") the fact must be stored; with Claude, which decides itself when to use its
tools, a missing fact is a warning.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

RUN_TIMEOUT_SECONDS = 180.0  # a queued run with a real model may take a minute or two
REQUEST_TIMEOUT_SECONDS = 60.0  # API Gateway ends any request at 30 s
REMEMBER = "remember that I prefer green tea"
FACT_WORDS = "green tea"
OFFLINE_PREFIX = "(offline model)"


class StepFailed(Exception):
    """A step that did not do what a user expects: what went wrong, the request and its answer."""

    def __init__(self, message: str, *, request: str = "", status: int | None = None, body: Any = None, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.request = request
        self.status = status
        self.body = body
        self.hint = hint


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Client:
    """JSON over HTTP with a bearer token; answers are (status, parsed body)."""

    def __init__(self, url: str, token: str, timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        self.url = url.rstrip("/")
        self.token = token.removeprefix("Bearer ").strip()
        self.timeout = timeout
        host = urllib.parse.urlsplit(self.url).hostname or ""
        # loopback never goes through a proxy; anything else honours the environment's proxies
        self._opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if _is_loopback(host) else []))

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("user-agent", "engram-smoke/1")
        if auth:
            request.add_header("authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("content-type", "application/json")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return response.status, _parse(response.read())
        except urllib.error.HTTPError as err:
            return err.code, _parse(err.read())
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise StepFailed(f"no answer from {self.url}: {reason}", request=f"{method} {path}") from err

    def expect(self, method: str, path: str, status: int, body: Any = None) -> Any:
        """The `data` of an answer with `status`, else StepFailed with the status and the envelope."""
        got, answer = self.call(method, path, body)
        if got != status or not isinstance(answer, dict) or answer.get("success") is not True:
            error = answer.get("error") if isinstance(answer, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            raise StepFailed(
                f"expected {status}, got {got}" + (f" {code}" if code else ""),
                request=f"{method} {path}",
                status=got,
                body=answer,
                hint=_hint(got, code),
            )
        return answer.get("data")


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode("utf-8", "replace")[:2000]


def _hint(status: int, code: str | None) -> str:
    if code == "turn_timeout":
        return (
            "the sync turn ran past its budget (SYNC_TURN_BUDGET_SECONDS, 25 s): the model answered too slowly; "
            "run the smoke test again, and see the chat function's logs under the error's runId"
        )
    if status == 401:
        return "the token was refused: use an access token of the stack's user pool (see README, Deploy), or dev-<user> locally"
    if status == 403:
        return "the token lacks a required scope (AuthScopes): use an access token, not an ID token"
    if code in ("model_error", "model_unreachable", "model_not_configured"):
        return "the model call failed: is the Anthropic key stored in the AnthropicSecretArn secret (or Bedrock model access enabled)?"
    return ""


def _short(text: Any, limit: int = 48) -> str:
    flat = " ".join(str(text).split())
    return '"' + (flat if len(flat) <= limit else flat[: limit - 3] + "...") + '"'


class Smoke:
    """The walk through the features; `run()` returns True when every step passed."""

    def __init__(self, client: Client, out: TextIO, run_timeout: float = RUN_TIMEOUT_SECONDS, poll: float = 0.25) -> None:
        self.client = client
        self.out = out
        self.run_timeout = run_timeout
        self.poll = poll
        self.agent_id: str | None = None
        self.offline: bool | None = None
        self.steps = 0
        self.warnings: list[str] = []
        self.failure: tuple[str, StepFailed] | None = None
        self._detail = ""

    # --- output ---------------------------------------------------------------------------------
    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def note(self, detail: str) -> None:
        self._detail = detail

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self._detail = ""
        warned = len(self.warnings)
        started = time.monotonic()
        try:
            try:
                yield
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
                raise StepFailed(f"an answer of an unexpected shape ({type(err).__name__}: {err})") from err
        except StepFailed as failed:
            self._report(name, started, "FAIL", failed.message)
            if failed.request:
                self._print(f"        {failed.request} -> {failed.status if failed.status is not None else 'no answer'}")
            if failed.body is not None:
                self._print(f"        {json.dumps(failed.body, ensure_ascii=False)[:2000]}")
            if failed.hint:
                self._print(f"        hint: {failed.hint}")
            if self.failure is None:
                self.failure = (name, failed)
            raise
        self.steps += 1
        self._report(name, started, "ok", self._detail)
        for message in self.warnings[warned:]:
            self._print(f"  warn  {message}")

    def _report(self, name: str, started: float, verdict: str, detail: str) -> None:
        ms = (time.monotonic() - started) * 1000
        self._print(f"  {verdict:<5} {name:<42} {ms:>6.0f} ms  {detail}".rstrip())

    # --- the walk ---------------------------------------------------------------------------------
    def run(self) -> bool:
        started = time.monotonic()
        self._print(f"Engram smoke test against {self.client.url}")
        try:
            self._walk()
        except StepFailed:
            pass
        except KeyboardInterrupt:
            self.failure = self.failure or ("interrupted", StepFailed("interrupted (Ctrl-C)"))
        finally:
            self._clean_up()
        seconds = time.monotonic() - started
        model = {None: "unknown", True: "offline", False: "Claude"}[self.offline]
        warned = f", {len(self.warnings)} warning(s)" if self.warnings else ""
        if self.failure is None:
            self._print(f"PASS  {self.steps} steps in {seconds:.1f} s, model: {model}{warned}")
            return True
        name, failed = self.failure
        where = f" ({failed.request} -> {failed.status})" if failed.request and failed.status is not None else ""
        self._print(f"FAIL  at step {name!r}: {failed.message}{where}")
        if failed.body is not None:
            self._print(f"      {json.dumps(failed.body, ensure_ascii=False)[:2000]}")
        return False

    def _walk(self) -> None:
        with self.step("console page"):
            status, page = self.client.call("GET", "/", auth=False)
            if status != 200 or not isinstance(page, str) or "<html" not in page.lower():
                raise StepFailed(f"expected the console's page, got {status}", request="GET /", status=status, body=page)
            self.note("GET / serves the console")
        with self.step("create agent (decision cards)"):
            agent = self.client.expect("POST", "/api/agents", 201, self._agent_body())
            self.agent_id = agent["id"]
            self.note(f"{self.agent_id}")
        messages = f"/api/agents/{self.agent_id}/sessions/dashboard/messages"
        with self.step('chat 1: "hello"'):
            turn = self._turn(messages, "hello")
            self.offline = turn["usage"]["costUsd"] == 0 and turn["reply"].startswith(OFFLINE_PREFIX)
            self.note(f"{'offline model' if self.offline else 'Claude'}, reply {_short(turn['reply'])}")
        with self.step(f'chat 2: "{REMEMBER}"'):
            turn = self._turn(messages, REMEMBER)
            tools = [call["name"] for call in turn["toolCalls"]]
            self.note(f"tools {', '.join(tools) or 'none'}, reply {_short(turn['reply'])}")
        with self.step('chat 3: "what do you know about me?"'):
            turn = self._turn(messages, "what do you know about me?")
            if not self.offline and "tea" not in turn["reply"].lower():
                self.warn("the reply to 'what do you know about me?' does not mention the tea")
            self.note(f"reply {_short(turn['reply'])}")
        with self.step("read facts (GET /api/me/facts)"):
            self._check_fact()
        with self.step("async turn (202, polled)"):
            accepted = self.client.expect("POST", messages + "?async=true", 202, {"message": "what time is it?"})
            run = self._wait(accepted["runId"])
            self.note(f"{run['id']} {run['status']}, reply {_short((run.get('result') or {}).get('reply', ''), 32)}")
        with self.step("manual run (202, polled, its card)"):
            started = self.client.expect("POST", f"/api/agents/{self.agent_id}/runs", 202, {})
            run = self._wait(started["runId"])
            card = self._card(run, "decision")
            self.note(
                f"{run['id']} card " + " ".join(f"{k}={_short(v, 24) if isinstance(v, str) else v}" for k, v in card.items())
            )
        manual_id = run["id"]
        with self.step("re-examine (202, polled, conviction)"):
            started = self.client.expect("POST", f"/api/runs/{manual_id}/re-examine", 202)
            run = self._wait(started["runId"])
            card = self._card(run, "re-examination")
            score = card.get("conviction_score")
            if not isinstance(score, int) or not 0 <= score <= 100:
                raise StepFailed(f"conviction_score is not an integer 0-100: {score!r}", body=run)
            parent = self.client.expect("GET", f"/api/runs/{manual_id}", 200)
            if parent.get("latestConviction") != score:
                raise StepFailed(
                    f"the re-examined run's latestConviction is {parent.get('latestConviction')!r}, not {score}", body=parent
                )
            self.note(f"{run['id']} conviction {score}, {card.get('suggested_action')}")

    def _agent_body(self) -> dict[str, Any]:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        return {
            "name": f"engram-smoke {stamp}",
            "persona": "You are a smoke test of a new Engram deployment. Answer in one or two short sentences.",
            "cardType": "decision",
            "defaultPrompt": "Should I have a cup of tea now? Decide (GO or WAIT), briefly.",
        }

    def _turn(self, path: str, message: str) -> dict[str, Any]:
        turn: dict[str, Any] = self.client.expect("POST", path, 200, {"message": message})
        if not isinstance(turn.get("reply"), str):
            raise StepFailed("the turn answered without a reply", body=turn)
        if not turn["reply"].strip():
            if self.offline:  # the offline model always says something
                raise StepFailed("the turn's reply is empty", body=turn)
            self.warn(f"the reply to {message!r} is empty (the model ended its turn with a tool call)")
        return turn

    def _facts(self) -> list[dict[str, Any]]:
        facts: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query = "?limit=100" + (f"&nextToken={urllib.parse.quote(token)}" if token else "")
            page = self.client.expect("GET", "/api/me/facts" + query, 200)
            facts.extend(page["items"])
            token = page.get("nextToken")
            if not token:
                return facts

    def _ours(self, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [f for f in facts if self.agent_id and (f.get("origin") or {}).get("agentId") == self.agent_id]

    def _check_fact(self) -> None:
        facts = self._facts()
        about_tea = [f for f in facts if FACT_WORDS in f["fact"].lower()]
        ours = self._ours(facts)
        if ours:
            self.note(f"{len(facts)} active, stored by this agent: {_short(ours[0]['fact'], 40)}")
        elif about_tea:
            self.note(f"{len(facts)} active, already known: {_short(about_tea[0]['fact'], 40)}")
        elif self.offline:
            raise StepFailed(f"no fact about {FACT_WORDS!r} after {REMEMBER!r} (the offline model always stores it)", body=facts)
        else:
            self.note(f"{len(facts)} active, none about {FACT_WORDS}")
            self.warn(f"the model did not store a fact after {REMEMBER!r} (Claude decides when to call remember)")

    def _wait(self, run_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.run_timeout
        delay = self.poll
        while True:
            run: dict[str, Any] = self.client.expect("GET", f"/api/runs/{run_id}", 200)
            if run["status"] == "succeeded":
                return run
            if run["status"] == "failed":
                error = run.get("error") or {}
                raise StepFailed(f"run {run_id} failed: {error.get('code')}: {error.get('message')}", body=run.get("error"))
            if time.monotonic() >= deadline:
                raise StepFailed(
                    f"run {run_id} is still {run['status']} after {self.run_timeout:.0f} s",
                    hint="the queue consumers (chat, heartbeat functions) may be failing: see their logs; --timeout waits longer",
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    @staticmethod
    def _card(run: dict[str, Any], card_type: str) -> dict[str, Any]:
        result = run.get("result") or {}
        card = result.get("card")
        if not isinstance(card, dict) or result.get("cardType") != card_type:
            raise StepFailed(f"run {run['id']} has no {card_type} card in result.card", body=result)
        return card

    # --- clean up -----------------------------------------------------------------------------------
    def _clean_up(self) -> None:
        if self.agent_id is None:
            return
        try:
            with self.step("clean up: archive its facts"):
                ours = self._ours(self._facts())
                for fact in ours:
                    self.client.expect("DELETE", f"/api/me/facts/{fact['id']}", 200)
                self.note(f"{len(ours)} archived")
        except StepFailed:
            self._print("        left behind: facts this agent stored (archive them under 'What I know about you')")
        try:
            with self.step("clean up: delete agent"):
                deleted = self.client.expect("DELETE", f"/api/agents/{self.agent_id}", 200)
                self.note(f"{self.agent_id}, {deleted.get('sessionsDeleted', 0)} session(s)")
        except StepFailed:
            self._print(
                f"        left behind: agent {self.agent_id} (delete it in the console or DELETE /api/agents/{self.agent_id})"
            )


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3.13 -m smoke",
        description="Walk a running Engram stack as a user would, then delete what the walk created.",
    )
    parser.add_argument("--url", default=os.environ.get("SMOKE_URL"), help="the API's base URL (ApiUrl); env SMOKE_URL")
    parser.add_argument("--token", default=os.environ.get("SMOKE_TOKEN"), help="a bearer token; env SMOKE_TOKEN")
    parser.add_argument(
        "--timeout", type=float, default=RUN_TIMEOUT_SECONDS, help="seconds to wait for each queued run (default %(default)s)"
    )
    args = parser.parse_args(argv)
    if not args.url or not args.token:
        parser.error("a URL and a token are required: --url/--token or SMOKE_URL/SMOKE_TOKEN")
    if urllib.parse.urlsplit(args.url).scheme not in ("http", "https"):
        parser.error(f"the URL must start with https:// (or http:// locally): {args.url!r}")
    smoke = Smoke(Client(args.url, args.token), out or sys.stdout, run_timeout=args.timeout)
    return 0 if smoke.run() else 1
