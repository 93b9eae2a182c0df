"""`make bench` (cold start as shipped): each handler's import time from the core layer as
`sam build` builds it, with and without the compiled bytecode the layer now ships, and what the
first model turn pays for the anthropic SDK.

The layer is built by its own Makefile target (layers/core/Makefile, `build-CoreLayer`, the one
`sam build` runs) into a temporary folder, for this machine's platform so that its native wheels
import here (Lambda gets the arm64 ones; the bytecode is the same). Each import runs in a fresh
interpreter as Lambda runs it: the function's code folder as LAMBDA_TASK_ROOT and first on the
path, then /opt/python (the layer), tracing on as deployed (POWERTOOLS_TRACE_DISABLED unset), and
PYTHONDONTWRITEBYTECODE=1 because /opt is read-only on Lambda: without shipped .pyc files every
cold start compiles every module it imports.

Printed per function: the median import time (ms) without and with the layer's .pyc files (X-Ray
SDK tracing on, as before TraceAwsCalls), with .pyc and without the SDK (the default now), its
ratio to a bare `import boto3` from the same layer, and
for the functions that call the model, the SDK's import on the first model turn before (imported
by the first turn) and after (imported during init by `providers.preload`). The environment holds
the template's own constant variables (Globals), e.g. PYDANTIC_DISABLE_PLUGINS.

Then, with SnapStart in mind: what the before-snapshot hook does per function (validators built,
clients warmed, its time: paid once per published version instead of by every cold start), and the
api function's ten most expensive modules by their own import time (`python -X importtime`).

`--instructions`: the same comparison counted in CPU instructions instead of milliseconds, each
import run once under valgrind's callgrind (a count that other work on the machine does not move,
unlike a time on a shared machine): the interpreter's own start (`python -c pass`) is subtracted
from each, then the api function's import (tracing as shipped by default, no X-Ray SDK) is given
as a multiple of a bare `import boto3`; for the api function also its import followed by a first
request (FIRST_REQUESTS: what a user's first call after a cold start waits for, as the api imports
the router of the request's path with it). Needs valgrind; takes a few minutes.

    python -m bench.cold_start [--repeats 7] [--layer DIR] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("api", "chat", "extract", "heartbeat")
MODEL_FUNCTIONS = ("chat", "extract", "heartbeat")

_PROBE = """
import importlib.util, sys, time
sys.path[:0] = [{task_root!r}, {layer!r}]
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", {task_root!r} + "/app.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
init = time.perf_counter() - start
loaded_at_init = "anthropic" in sys.modules
start = time.perf_counter()
import engram.engine.providers.anthropic_provider  # what the first model turn imports
first_turn = time.perf_counter() - start
print(init, first_turn, loaded_at_init)
"""


def build_layer(target: Path, *, compiled: bool) -> Path:
    """`make build-CoreLayer` into `target` (the layer's python/ is inside it)."""
    machine = "aarch64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    env = {
        **os.environ,
        "ARTIFACTS_DIR": str(target),
        "PYTHON": sys.executable,
        "LAYER_PLATFORM": f"manylinux2014_{machine}",
        "COMPILE": "1" if compiled else "0",
    }
    subprocess.run(["make", "-s", "-C", str(ROOT / "layers" / "core"), "build-CoreLayer"], env=env, check=True)
    return target / "python"


_BARE_BOTO3 = """
import sys, time
sys.path[:0] = [{layer!r}]
start = time.perf_counter()
import boto3
print(time.perf_counter() - start)
"""


# What the api function cannot import less than: powertools' HTTP resolver (with request
# validation), Logger and Metrics, and pydantic, as the function imports them (after `engram`'s own
# package init, whose kernel.lazy_packages leaves out the resolvers and event classes the api does
# not use); the rest of its import is Engram's own code.
_LIBRARIES = "import engram, aws_lambda_powertools.event_handler.api_gateway, aws_lambda_powertools.event_handler.openapi.params, aws_lambda_powertools.logging, aws_lambda_powertools.metrics, pydantic"


def bare_boto3(layer: Path, statement: str = "import boto3") -> float:
    """The yardstick (issue 12): a bare `import boto3` from the same layer, ms (or `statement`)."""
    env = {**template_constants(), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "POWERTOOLS_TRACE_DISABLED": "true"}
    code = _BARE_BOTO3.format(layer=str(layer)).replace("import boto3", statement)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.split()[-1]) * 1000


def template_constants() -> dict[str, str]:
    """The functions' environment variables that the template sets to plain strings (Globals)."""
    sys.path.insert(0, str(ROOT))
    from local.template import load_template

    variables = load_template(ROOT / "template.yaml").function_globals["Environment"]["Variables"]
    return {name: value for name, value in variables.items() if isinstance(value, str)}


def lambda_env(function: str) -> dict[str, str]:
    """A function's environment as Lambda sets it up, with the template's constants."""
    return {
        **template_constants(),
        "PATH": "/usr/bin:/bin",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "LAMBDA_TASK_ROOT": str(ROOT / "functions" / function),
        "AWS_LAMBDA_FUNCTION_NAME": f"engram-{function}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MODEL_PROVIDER": "anthropic",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


def probe(function: str, layer: Path, *, preload: bool, sdk_tracing: bool = True) -> tuple[float, float, bool]:
    env = {
        **lambda_env(function),
        # anthropic: the model functions import the SDK during init (providers.preload); offline
        # stands for the code before that change, where the first model turn imported it.
        "MODEL_PROVIDER": "anthropic" if preload else "offline",
        # TraceAwsCalls (template): "false" by default, Lambda's active tracing without the X-Ray SDK.
        "POWERTOOLS_TRACE_DISABLED": "false" if sdk_tracing else "true",
    }
    code = _PROBE.format(task_root=str(ROOT / "functions" / function), layer=str(layer))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    init, first_turn, loaded = out.stdout.split()[-3:]
    return float(init) * 1000, float(first_turn) * 1000, loaded == "True"


_PRIME = """
import importlib.util, sys, time
sys.path[:0] = [{task_root!r}, {layer!r}]
spec = importlib.util.spec_from_file_location("app", {task_root!r} + "/app.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from engram.aws import snapstart
start = time.perf_counter()
done = snapstart.prime()
print(done["validators"], done["clients"], time.perf_counter() - start)
"""


def snapshot_priming(function: str, layer: Path) -> tuple[int, int, float]:
    """The before-snapshot hook's work in a freshly imported function: (validators, clients, ms)."""
    code = _PRIME.format(task_root=str(ROOT / "functions" / function), layer=str(layer))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=lambda_env(function))
    validators, clients, seconds = out.stdout.split()[-3:]
    return int(validators), int(clients), float(seconds) * 1000


def import_top(function: str, layer: Path, count: int = 10) -> list[tuple[float, float, str]]:
    """`python -X importtime` of the handler: the `count` modules with the largest own time,
    as (own ms, cumulative ms, module)."""
    code = _PRIME.format(task_root=str(ROOT / "functions" / function), layer=str(layer)).split("from engram.aws")[0]
    env = {**lambda_env(function), "MODEL_PROVIDER": "offline"}
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True, env=env)
    rows = []
    for line in out.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[0]) / 1000, int(parts[1]) / 1000, parts[2].strip()))
    return sorted(rows, reverse=True)[:count]


def instructions(code: str, env: dict[str, str]) -> int:
    """The instructions a fresh interpreter running `code` executes (valgrind's callgrind)."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env={**env, "PYTHONHASHSEED": "0"})
    collected = [line for line in out.stderr.splitlines() if "Collected :" in line]
    return int(collected[-1].rsplit(":", 1)[1])


def instruction_counts(layer: Path) -> None:
    """The api function's import and a bare `import boto3`, in instructions, the interpreter's start taken off."""
    bare_env = {
        **template_constants(),
        "PATH": "/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    empty = instructions("pass", bare_env)
    boto3 = instructions(_BARE_BOTO3.format(layer=str(layer)), bare_env) - empty
    libraries = instructions(_BARE_BOTO3.format(layer=str(layer)).replace("import boto3", _LIBRARIES), bare_env) - empty
    print(f"   instructions (callgrind, the interpreter's start of {empty / 1e6:,.0f} M taken off):")
    print(f"   {'bare import boto3':<28} {boto3 / 1e6:>8,.0f} M")
    print(f"   {'the libraries alone':<28} {libraries / 1e6:>8,.0f} M  {libraries / boto3:.2f}x boto3")
    for function in FUNCTIONS:
        env = {**lambda_env(function), "MODEL_PROVIDER": "offline" if function == "api" else "anthropic"}
        code = _PROBE.format(task_root=str(ROOT / "functions" / function), layer=str(layer)).split("init = ")[0]
        count = instructions(code, env) - empty
        print(f"   {function + ' function import':<28} {count / 1e6:>8,.0f} M  {count / boto3:.2f}x boto3", flush=True)
        if function == "api":
            unreachable = {
                **env,
                "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
            }
            for method, path, body in FIRST_REQUESTS:
                total = instructions(first_request_code(code, method, path, body), unreachable) - empty
                label = f"  + first {method} {path}"
                print(
                    f"   {label:<28} {total / 1e6:>8,.0f} M  {total / boto3:.2f}x boto3 (the request: {(total - count) / 1e6:,.0f} M)",
                    flush=True,
                )


# The first request a cold api function serves, after its import: what the user waits for. AWS is
# a closed port on loopback (the request's DynamoDB read fails after botocore's retries, a 503),
# so the count holds the client's creation and the request's own work, not a network.
_FIRST_REQUEST = """
import json
class Context:
    function_name, memory_limit_in_mb, aws_request_id = "engram-api", 512, "bench"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:engram-api"
    def get_remaining_time_in_millis(self):
        return 15000
for event in json.loads({events!r}):
    print(module.lambda_handler(event, Context())["statusCode"])
"""

FIRST_REQUESTS = (("GET", "/api/agents", None), ("POST", "/mcp", b'{{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}'))


def first_request_code(function_code: str, method: str, path: str, body: bytes | None) -> str:
    """`function_code` (the handler's import) followed by one request to it, signed in (JWT claims)."""
    import json

    from local.apigw import build_http_event

    event = build_http_event(
        f"{method} {path}", method, path, body=body, headers={"content-type": "application/json"}, claims={"sub": "bench"}
    )
    return function_code + _FIRST_REQUEST.format(events=json.dumps([event]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)  # the issue: medians of 7
    parser.add_argument("--layer", help="an already built layer folder (with python/ compiled); default: build one")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead of timing")
    args = parser.parse_args(argv)
    print("== cold start as shipped: handler import from the built core layer (tracing on, /opt read-only)")
    work = Path(tempfile.mkdtemp(prefix="engram-layer-"))
    try:
        if args.layer:
            compiled_layer = Path(args.layer) / "python"
            plain_layer = work / "plain"
            shutil.copytree(compiled_layer, plain_layer, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            compiled_layer = build_layer(work / "compiled", compiled=True)
            plain_layer = work / "plain"
            shutil.copytree(compiled_layer, plain_layer, ignore=shutil.ignore_patterns("__pycache__"))
        if args.instructions:
            instruction_counts(compiled_layer)
            return 0
        boto3_ms = statistics.median(bare_boto3(compiled_layer) for _ in range(args.repeats))
        libraries_ms = statistics.median(bare_boto3(compiled_layer, _LIBRARIES) for _ in range(args.repeats))
        print(f"   a bare `import boto3` from the layer: {boto3_ms:.0f} ms (median of {args.repeats})")
        print(
            f"   the libraries alone (powertools resolver, Logger, Metrics; pydantic): {libraries_ms:.0f} ms,"
            f" {libraries_ms / boto3_ms:.2f}x boto3 (the api function's floor)"
        )
        print(
            f"   {'function':<10} {'no .pyc':>9} {'with .pyc':>10} {'no X-Ray SDK':>13} {'x boto3':>8}"
            "   first model turn: SDK import before -> after"
        )
        for function in FUNCTIONS:
            plain = [probe(function, plain_layer, preload=False) for _ in range(args.repeats)]
            compiled = [probe(function, compiled_layer, preload=False) for _ in range(args.repeats)]
            untraced = [probe(function, compiled_layer, preload=False, sdk_tracing=False) for _ in range(args.repeats)]
            preloaded = [probe(function, compiled_layer, preload=True) for _ in range(args.repeats)]
            lean = statistics.median(u[0] for u in untraced)
            line = (
                f"   {function:<10} {statistics.median(p[0] for p in plain):>7.0f} ms {statistics.median(c[0] for c in compiled):>7.0f} ms"
                f" {lean:>10.0f} ms {lean / boto3_ms:>7.2f}x"
            )
            if function in MODEL_FUNCTIONS:
                before = statistics.median(c[1] for c in compiled)
                after = statistics.median(p[1] for p in preloaded)
                init_after = statistics.median(p[0] for p in preloaded)
                line += f"   {before:>5.0f} ms -> {after:.0f} ms (init {init_after:.0f} ms with the SDK)"
            else:
                line += f"   (never imports the SDK: {not any(c[2] for c in compiled)})"
            print(line, flush=True)
        print("   SnapStart: the before-snapshot hook (once per published version, not per cold start)")
        for function in FUNCTIONS:
            validators, clients, ms = snapshot_priming(function, compiled_layer)
            print(f"   {function:<10} {validators:>3} validators built, {clients} AWS clients warmed: {ms:.0f} ms")
        print("   api function, `python -X importtime`, the ten largest own times (ms own / cumulative):")
        for own, cumulative, module in import_top("api", compiled_layer):
            print(f"   {own:>7.1f} {cumulative:>8.1f}  {module}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
