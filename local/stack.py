"""The whole stack on 127.0.0.1: `python -m local.stack` (make dev), or `start_stack()` from tests.

moto's server stands in for DynamoDB, S3, SQS and EventBridge Scheduler; the table, bucket,
queues and schedule group are created from template.yaml; the functions' environment is what the
template gives them (with local names); an HTTP front builds API Gateway v2 events for the same
handlers; background workers feed the queue consumers and fire the agents' schedules. Everything
listens on loopback only.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urlsplit

from . import stats
from .apigw import Functions, HttpRequest, HttpResponse, dispatch, load_functions
from .resources import Resources, create_resources, references
from .schedules import ScheduleLoop
from .sockets import MANAGEMENT_PREFIX, LocalSockets, socket_function
from .template import ROOT, Template, load_template
from .workers import Workers

log = logging.getLogger("local")

REGION = "us-east-1"
PREFIX = "engram-local"
DEFAULT_PORT = 3000
PREFERRED_MOTO_PORT = 4566
# Local runs have no X-Ray daemon and nobody reads EMF metrics on stdout.
SAMPLE_MCP_PORT = 3001  # the sample MCP server (local/sample_mcp.py) beside the stack
STREAM_PORT = 3002  # the WebSocket API (local/sockets.py)
LOCAL_DEFAULTS = {"POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_DISABLED": "true"}
# No user pool locally, so no issuer; one running on loopback (an OAuth authorization server such
# as tests/oauth's) may be given from the shell: AUTH_ISSUER=http://127.0.0.1:9000 AUTH_AUDIENCE=...
ISSUER_FROM_SHELL = ("AUTH_ISSUER", "AUTH_AUDIENCE")


def _require_loopback(host: str) -> None:
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"the local stack only listens on loopback (127.0.0.1, ::1, localhost), not {host!r}")


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _no_proxy_for_loopback() -> dict[str, str]:
    loopback = ["127.0.0.1", "localhost", "::1"]
    out = {}
    for key in ("NO_PROXY", "no_proxy"):
        current = [h for h in os.environ.get(key, "").split(",") if h]
        out[key] = ",".join(current + [h for h in loopback if h not in current])
    return out


def _choose_provider(requested: str | None) -> str:
    if requested:
        return requested
    if os.environ.get("MODEL_PROVIDER") in ("offline", "anthropic"):
        return os.environ["MODEL_PROVIDER"]
    return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "offline"


def function_environment(
    template: Template, resources: Resources, model_provider: str, user_env: Mapping[str, str]
) -> dict[str, str]:
    """The union of every function's variables (they share one process). Values derived from
    resources are always the local ones; parameter-derived ones may be overridden from the shell
    (`HISTORY_CAP=10 make dev`)."""
    env: dict[str, str] = dict(LOCAL_DEFAULTS)
    env.update({k: v for k, v in user_env.items() if k in LOCAL_DEFAULTS})
    # With the emulated user pool, the issuer and audiences are its own, not the shell's.
    from_shell = () if resources.user_pool() else ISSUER_FROM_SHELL
    for spec in template.functions():
        values = resources.env(spec.logical_id, model_provider=model_provider)
        for key, value in values.items():
            from_resources = bool(references(spec.environment.get(key)) & template.resources.keys())
            if key != "MODEL_PROVIDER" and (not from_resources or key in from_shell) and key in user_env:
                value = user_env[key]
            if env.get(key, value) != value and key not in LOCAL_DEFAULTS:
                raise ValueError(f"{key} differs between functions; the local stack runs them in one process")
            env[key] = value
    env.update(resources.emulator_env())
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") and "TRACING_EXPORT" not in user_env:
        env["TRACING_EXPORT"] = "otlp"  # a local collector named: the runs' timelines go to it (OB2)
    return env


class _HttpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "engram-local"
    # The headers and the body go out in two writes: with Nagle's algorithm the body waited for the
    # client's delayed ACK of the headers, ~40 ms on every kept-alive request (a turn's event pushes).
    disable_nagle_algorithm = True
    functions: Functions  # set on the per-stack subclass
    sockets: LocalSockets | None = None
    measure: bool = False  # GET /@local/stats and per-route timings (local/stats.py)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _serve(self) -> None:
        started = time.monotonic()
        headers = [(k, v) for k, v in self.headers.items() if k.lower() != "transfer-encoding"]
        request = HttpRequest(self.command, self.path, headers, self._read_body(), self.client_address[0])
        if self.sockets is not None and self.path.startswith(MANAGEMENT_PREFIX + "/"):
            # The WebSocket API's management API, which the workers post a turn's events to.
            status, extra, body = self.sockets.manage(self.command, self.path, request.body)
            response = HttpResponse(status, list(extra.items()), body)
        elif self.measure and self.path.split("?", 1)[0] == stats.STATS_PATH:
            answer = stats.snapshot(data="data=0" not in self.path)
            response = HttpResponse(200, [("content-type", "application/json")], json.dumps(answer).encode())
        else:
            response = dispatch(self.functions, request)
            if self.measure:
                matched = self.functions.match(self.command, unquote(urlsplit(self.path).path))
                name = f"{matched[0].method} {matched[0].path}" if matched else "unrouted"
                stats.record(f"route.{name}", time.monotonic() - started)
        self.send_response_only(response.status)
        for name, value in response.headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(response.body)))
        self.send_header("date", self.date_time_string())
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)
        # The path without its query, as API Gateway's access log has the route (a query may carry
        # an OAuth callback's code and state).
        path = self.path.split("?", 1)[0]
        log.info("%s %s -> %d (%.0f ms)", self.command, path, response.status, (time.monotonic() - started) * 1000)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is written by _serve


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog is 5: a burst of 20 clients got connection resets.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-response (a browser closing a tab or navigating on) is one
        quiet line, not socketserver's traceback; anything else keeps the traceback."""
        err = sys.exc_info()[1]
        if isinstance(err, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            log.info("client %s disconnected before the response was sent (%s)", client_address[0], type(err).__name__)
            return
        super().handle_error(request, client_address)


@dataclass
class StackHandle:
    """A running local stack. `stop()` shuts it down and restores the process as it was."""

    url: str
    moto_url: str
    model_provider: str
    template: Template
    resources: Resources
    functions: Functions
    workers: Workers
    env: dict[str, str]
    _server: _HttpServer
    _moto: Any
    _restore: list[Any] = field(default_factory=list)
    _stopped: bool = False
    schedule_loop: ScheduleLoop | None = None
    sockets: LocalSockets | None = None

    @property
    def stream_url(self) -> str:
        """The WebSocket API (ws://...), when the template has one."""
        return self.sockets.url if self.sockets is not None else ""

    def drain(self, queue_id: str = "TurnQueue", timeout: float = 30.0) -> int:
        return self.workers.drain(queue_id, timeout)

    def fire_schedules(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """Fire the schedules due at `now` (default: the clock) in the calling thread; returns the events."""
        if self.schedule_loop is None:
            raise RuntimeError("this stack has no schedule loop")
        return self.schedule_loop.tick(now)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        if self.sockets is not None:
            self.sockets.stop()
        self.workers.stop()
        if self.schedule_loop is not None:
            self.schedule_loop.stop()
        _reset_moto(self.moto_url)
        self._moto.stop()
        for undo in reversed(self._restore):
            undo()

    def __enter__(self) -> StackHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback never goes through a proxy


def _reset_moto(url: str) -> None:
    """Empty moto's in-memory backends (they are process-wide, shared with any earlier stack)."""
    try:
        _DIRECT.open(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=5).close()
    except OSError:
        log.warning("could not reset moto at %s", url)


def _set_environ(values: Mapping[str, str | None]) -> Any:
    """Apply values (None removes) and return an undo."""
    before = {k: os.environ.get(k) for k in values}
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

    def undo() -> None:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    return undo


def _isolate_layers(layer_dirs: list[Path]) -> Any:
    """Put the layers on sys.path and give the stack its own import of them (a cold start); the
    undo restores sys.path and whatever modules the process had imported from the layers before."""
    roots = [str(d.resolve()) for d in layer_dirs if d.is_dir()]

    def from_layers(module: ModuleType) -> bool:
        file = getattr(module, "__file__", None) or ""
        return any(file.startswith(root + os.sep) for root in roots)

    saved = {name: mod for name, mod in sys.modules.items() if mod is not None and from_layers(mod)}
    for name in saved:
        del sys.modules[name]
    added = [root for root in roots if root not in sys.path]
    sys.path[:0] = added

    def undo() -> None:
        for name in [n for n, m in sys.modules.items() if m is not None and from_layers(m)]:
            del sys.modules[name]
        sys.modules.update(saved)
        for root in added:
            if root in sys.path:
                sys.path.remove(root)

    return undo


def start_stack(
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    root: str | Path = ROOT,
    template_path: str | Path | None = None,
    model_provider: str | None = None,
    moto_port: int = 0,
    workers: bool = True,
    retry_delay: int = 2,
    preload: bool = True,
    stream_port: int = 0,
    measure: bool = False,
    user_pool: bool = False,
) -> StackHandle:
    """Start moto, create the resources, load the handlers, start the queue workers, the schedule
        loop and the HTTP front. `port=0` (and `moto_port=0`) pick free ports; `handle.url` says where
        it listens. `model_provider`: offline | anthropic (default: anthropic when ANTHROPIC_API_KEY is
        set). `workers=False` leaves the queues to `handle.drain()` and the schedules to
        `handle.fire_schedules()`. The WebSocket API listens on `stream_port` (0: a free one;
    `handle.stream_url`). `measure=True` times every AWS call and route and answers
        `GET /@local/stats` (local/stats.py). `user_pool=True` creates the template's Cognito user pool
        and app clients in moto (local/resources.py USER_POOL_CREATORS): its tokens sign in, and
        /api/oauth/register registers clients in it. Changes os.environ, sys.path and the layer modules in sys.modules
        until `stop()`."""
    from moto.server import (
        ThreadedMotoServer,  # the server part of moto is only needed here
    )

    _require_loopback(host)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every AWS call otherwise
    root = Path(root)
    template = load_template(template_path or root / "template.yaml")
    provider = _choose_provider(model_provider)
    user_env = dict(os.environ)
    restore: list[Any] = []
    moto_port = moto_port or _free_port()
    if not _port_is_free(moto_port):  # moto's thread would die on bind and start() would wait forever
        raise OSError(f"moto cannot listen on 127.0.0.1:{moto_port}: the port is in use")
    from .emulator import patch_moto

    patch_moto()  # one DynamoDB lock, bounded transactions, no instance registry (local/emulator.py)
    if measure:
        stats.install()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
    moto.start()
    moto_url = f"http://127.0.0.1:{moto_port}"
    server: _HttpServer | None = None
    try:
        _reset_moto(moto_url)
        restore.append(
            _set_environ(
                {
                    "AWS_ENDPOINT_URL": moto_url,
                    "AWS_ACCESS_KEY_ID": "local",
                    "AWS_SECRET_ACCESS_KEY": "local",
                    "AWS_SESSION_TOKEN": None,
                    "AWS_SECURITY_TOKEN": None,
                    "AWS_PROFILE": None,
                    "AWS_DEFAULT_REGION": REGION,
                    "AWS_REGION": REGION,
                    "AWS_EC2_METADATA_DISABLED": "true",
                    **_no_proxy_for_loopback(),
                }
            )
        )
        resources = create_resources(template, prefix=PREFIX, region=REGION, endpoint_url=moto_url, user_pool=user_pool)
        env = function_environment(template, resources, provider, user_env)
        # The ports are chosen now: the functions read where the WebSocket API and its management
        # API are (STREAM_URL, STREAM_ENDPOINT) when they load.
        port = port or _free_port()
        stream_port = stream_port or _free_port()
        if not _port_is_free(stream_port):
            raise OSError(f"the WebSocket API cannot listen on {host}:{stream_port}: the port is in use; set --stream-port")
        origin = f"[{host}]" if ":" in host else host
        env["STREAM_URL"] = f"ws://{origin}:{stream_port}"
        env["STREAM_ENDPOINT"] = f"http://{origin}:{port}{MANAGEMENT_PREFIX}"
        restore.append(_set_environ(env))
        restore.append(_isolate_layers([root / d for d in template.layer_dirs()]))
        functions = load_functions(template, root, prefix=PREFIX, region=REGION)
        restore.append(functions.unload)
        if preload:
            functions.preload()
        pool = Workers(functions, resources, retry_delay=retry_delay)
        schedule_loop = ScheduleLoop(functions, resources)
        if workers:
            pool.start()
            schedule_loop.start()
        socket_target = socket_function(template)
        sockets = LocalSockets(functions, socket_target, host, stream_port) if socket_target else None
        if sockets is not None:
            sockets.start()
        handler = type("StackHttpHandler", (_HttpHandler,), {"functions": functions, "sockets": sockets, "measure": measure})
        server_cls = type("_HttpServer6", (_HttpServer,), {"address_family": socket.AF_INET6}) if ":" in host else _HttpServer
        try:
            server = server_cls((host, port), handler)
        except OSError as err:
            pool.stop()
            schedule_loop.stop()
            if sockets is not None:
                sockets.stop()
            raise OSError(f"cannot listen on {host}:{port} ({err.strerror}); set PORT or --port") from err
        threading.Thread(target=server.serve_forever, name="engram-http", daemon=True).start()
        bound = server.server_address[1]
        url = f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"
    except BaseException:
        _reset_moto(moto_url)
        moto.stop()
        for undo in reversed(restore):
            undo()
        raise
    return StackHandle(
        url=url,
        moto_url=moto_url,
        model_provider=provider,
        template=template,
        resources=resources,
        functions=functions,
        workers=pool,
        env=env,
        _server=server,
        _moto=moto,
        _restore=restore,
        schedule_loop=schedule_loop,
        sockets=sockets,
    )


def _mcp_lines(url: str, auth: str, json_h: str, sample_url: str | None) -> list[str]:
    if not sample_url:
        return []
    return [
        f"Agents that act: a sample MCP server runs at {sample_url} (lookup_price, search_tickets).",
        f"  CONN=$(curl -s -X POST {url}/api/connections {auth} {json_h} \\",
        f'         -d \'{{"name":"market","url":"{sample_url}"}}\' | python3 -c \'import sys,json; print(json.load(sys.stdin)["data"]["id"])\')',
        f"  curl -s -X POST {url}/api/connections/$CONN/test {auth}",
        f'  curl -s -X PATCH {url}/api/agents/$AGENT {auth} {json_h} -d "{{\\"tools\\":[{{\\"connectionId\\":\\"$CONN\\"}}]}}"',
        f"  curl -s -X POST {url}/api/agents/$AGENT/sessions/dashboard/messages {auth} {json_h} \\",
        '       -d \'{"message":"use lookup_price for BTC"}\'',
        "",
    ]


def _user_pool_lines(handle: StackHandle) -> list[str]:
    pool = handle.resources.user_pool()
    if not pool:
        return []
    aws = f"aws --endpoint-url {handle.moto_url} cognito-idp"
    return [
        f"User pool (emulated by moto): {pool}; its access tokens sign in to /api and /mcp.",
        f"  {aws} admin-create-user --user-pool-id {pool} --username you@example.com --temporary-password Temp-pass-123",
        f"  {aws} admin-set-user-password --user-pool-id {pool} --username you@example.com --password Your-pass-1234 --permanent",
        f"  {aws} admin-initiate-auth --user-pool-id {pool} --client-id <client> --auth-flow ADMIN_USER_PASSWORD_AUTH \\",
        "       --auth-parameters USERNAME=you@example.com,PASSWORD=Your-pass-1234",
        "  (<client>: one of AUTH_AUDIENCE, or a client_id from POST /api/oauth/register; moto has no managed login pages)",
        "",
    ]


def quickstart(handle: StackHandle, sample_mcp_url: str | None = None) -> str:
    url, res, env = handle.url, handle.resources, handle.env
    if handle.model_provider == "anthropic":
        chat, extract = env.get("CHAT_MODEL"), env.get("EXTRACT_MODEL")
        model = f"Claude via the Anthropic API (ANTHROPIC_API_KEY is set; chat {chat}, extraction {extract})"
    else:
        model = "the offline deterministic model (set ANTHROPIC_API_KEY to use Claude)"
    auth = "-H 'Authorization: Bearer dev-alice'"
    json_h = "-H 'content-type: application/json'"
    queues = ", ".join(p.attrs["QueueName"] for p in res.queues().values())
    return "\n".join(
        [
            "",
            "Engram local stack",
            f"  API     {url}   (auth: 'Authorization: Bearer dev-<user>', loopback only)",
            f"  Stream  {handle.stream_url}   (WebSocket API: a ticket from POST /api/stream-tickets opens it)",
            f"  Model   {model}",
            f"  AWS     moto at {handle.moto_url}: table {res.table_name()}, bucket {res.bucket_name()}",
            f"          queues {queues}",
            "",
            "Try it:",
            f'  AGENT=$(curl -s -X POST {url}/api/agents {auth} {json_h} -d \'{{"name":"Scout"}}\' \\',
            '          | python3 -c \'import sys,json; print(json.load(sys.stdin)["data"]["id"])\')',
            f"  curl -s -X POST {url}/api/agents/$AGENT/sessions/dashboard/messages {auth} {json_h} \\",
            '       -d \'{"message":"remember that I prefer short answers"}\'',
            f"  curl -s {url}/api/agents/$AGENT/sessions/dashboard {auth}",
            "",
            'Schedules: an agent created with "schedule":"rate(1 minute)" runs its heartbeat every minute.',
            "",
            *_mcp_lines(url, auth, json_h, sample_mcp_url),
            *_user_pool_lines(handle),
            "The engram command (clients/python; make install puts it in .venv/bin):",
            f"  .venv/bin/engram login --url {url} --key dev-alice   # or an egk_ key; stored 0600 in ~/.config/engram",
            "  .venv/bin/engram agents            # also: facts, memories AGENT, runs AGENT, usage; --json",
            "  .venv/bin/engram chat Scout        # streams the reply and tool calls; Ctrl-D or /quit leaves",
            f"  (or ENGRAM_URL={url} ENGRAM_API_KEY=dev-alice in the environment, which wins over login)",
            "",
            "Engram for other agents: an API key (shown once), then Engram's MCP server at /mcp:",
            f'  curl -s -X POST {url}/api/me/api-keys {auth} {json_h} -d \'{{"name":"claude-code"}}\'',
            f'  claude mcp add --transport http engram {url}/mcp --header "Authorization: Bearer egk_..."',
            "",
            "Ctrl-C stops the stack (all data is in memory and goes with it).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.stack", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("PORT", DEFAULT_PORT)), help="HTTP port (default $PORT or 3000)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    parser.add_argument(
        "--stream-port",
        type=int,
        default=int(os.environ.get("STREAM_PORT", STREAM_PORT)),
        help="the WebSocket API's port (default $STREAM_PORT or 3002)",
    )
    parser.add_argument("--model-provider", choices=["offline", "anthropic"], default=None)
    parser.add_argument("--moto-port", type=int, default=None, help=f"moto port (default {PREFERRED_MOTO_PORT} if free)")
    parser.add_argument(
        "--sample-mcp-port", type=int, default=SAMPLE_MCP_PORT, help="the sample MCP server's port (0: do not start it)"
    )
    parser.add_argument(
        "--user-pool",
        action="store_true",
        help="create the template's Cognito user pool in moto: its tokens sign in, /api/oauth/register registers clients",
    )
    parser.add_argument(
        "--stats", action="store_true", help="time AWS calls and routes, answer GET /@local/stats (bench/soak.py)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("werkzeug", "botocore", "boto3", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Metrics are disabled locally; powertools still warns on every invocation that none were published.
    warnings.filterwarnings("ignore", message="No application metrics to publish")

    if args.model_provider == "anthropic" and not os.environ.get("ANTHROPIC_API_KEY"):
        parser.error("--model-provider anthropic needs ANTHROPIC_API_KEY in the environment")
    moto_port = args.moto_port or (PREFERRED_MOTO_PORT if _port_is_free(PREFERRED_MOTO_PORT) else 0)
    try:
        handle = start_stack(
            args.port,
            host=args.host,
            model_provider=args.model_provider,
            moto_port=moto_port,
            stream_port=args.stream_port,
            measure=args.stats,
            user_pool=args.user_pool,
        )
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    sample = None
    if args.sample_mcp_port and _port_is_free(args.sample_mcp_port):
        from .sample_mcp import start as start_sample_mcp

        sample = start_sample_mcp(args.sample_mcp_port)
    print(quickstart(handle, sample.url if sample else None), flush=True)

    stop = threading.Event()
    # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored otherwise.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    print("\nstopping...", flush=True)
    if sample is not None:
        sample.stop()
    handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
