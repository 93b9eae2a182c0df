"""local/apigw.py's LoadedFunction: execution environments as in Lambda.

A handler module's globals (powertools' resolver with its current event, the logger's keys) serve
one invocation at a time: concurrent invocations of a function get environments of their own
(each its own import of the module) instead of sharing them, so a long invocation never holds
up another; idle environments are reused, and their number is capped.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from local.apigw import LoadedFunction
from local.template import FunctionSpec

HANDLER = """
import threading, time

CURRENT = None  # like a resolver's current_event: module state the handler relies on
ACTIVE = 0
PEAK = 0
_COUNT = threading.Lock()


def handler(event, context):
    global CURRENT, ACTIVE, PEAK
    with _COUNT:
        ACTIVE += 1
        PEAK = max(PEAK, ACTIVE)
    CURRENT = event
    time.sleep(0.005)  # let any other invocation in
    seen = CURRENT
    with _COUNT:
        ACTIVE -= 1
    return {"event": event, "seen": seen, "request": context.aws_request_id}
"""

WAITER = """
import threading

OTHER_RAN = threading.Event()


def handler(event, context):
    return OTHER_RAN.wait(10)  # True only if the other function ran meanwhile
"""

SETTER = """
def handler(event, context):
    event["set"]()
    return True
"""


def _function(tmp_path: Path, name: str, source: str) -> LoadedFunction:
    (tmp_path / name).mkdir()
    (tmp_path / name / "app.py").write_text(source)
    spec = FunctionSpec(
        logical_id=f"{name.title()}Function", code_uri=name, handler="app.handler", timeout=30, memory_size=128, environment={}
    )
    return LoadedFunction(spec, tmp_path, prefix="test", region="us-east-1")


def test_concurrent_invocations_of_one_function_never_share_its_module_state(tmp_path):
    function = _function(tmp_path, "shared", HANDLER)
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(function.invoke, [{"n": i} for i in range(48)]))
    assert [r["seen"] for r in results] == [{"n": i} for i in range(48)]  # each saw its own event throughout
    assert [r["event"] for r in results] == [r["seen"] for r in results]
    assert len({r["request"] for r in results}) == 48  # and its own context
    assert function.module().PEAK == 1
    assert 1 < function.environments() <= LoadedFunction.MAX_ENVIRONMENTS
    function.unload()


SLOW = """
def handler(event, context):
    if "wait_for" in event:
        event["started"].set()
        return event["wait_for"].wait(10)  # True only if a second invocation ran meanwhile
    if "set" in event:
        event["set"]()
    return "quick"
"""


def test_a_long_invocation_does_not_hold_up_the_next_one_of_the_same_function(tmp_path):
    function = _function(tmp_path, "long", SLOW)
    released = threading.Event()
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = threading.Event()
        slow = pool.submit(function.invoke, {"wait_for": released, "started": started})
        assert started.wait(10)
        assert function.invoke({"set": released.set}) == "quick"  # served by a second environment, at once
        assert slow.result(timeout=10) is True
    assert function.environments() == 2
    assert function.invoke({}) == "quick" and function.environments() == 2  # an idle one is reused
    function.unload()


def test_every_environment_gets_what_prepare_sets_up(tmp_path):
    function = _function(tmp_path, "prepared", SLOW)
    function.prepare(lambda module: setattr(module, "PREPARED", True))
    with ThreadPoolExecutor(max_workers=2) as pool:
        released = threading.Event()
        started = threading.Event()
        slow = pool.submit(function.invoke, {"wait_for": released, "started": started})
        assert started.wait(10)
        function.invoke({"set": released.set})
        slow.result(timeout=10)
    modules = [name for name in sys.modules if name.startswith("_engram_local") and name.endswith("PreparedFunction_app")]
    assert len(modules) == 2 and all(getattr(sys.modules[name], "PREPARED", False) for name in modules)
    function.unload()


def test_different_functions_run_at_the_same_time(tmp_path):
    waiter, setter = _function(tmp_path, "waiter", WAITER), _function(tmp_path, "setter", SETTER)
    event = waiter.module().OTHER_RAN
    with ThreadPoolExecutor(max_workers=2) as pool:
        waiting = pool.submit(waiter.invoke, {})
        time.sleep(0.01)
        assert setter.invoke({"set": event.set}) is True
        assert waiting.result(timeout=10) is True
    waiter.unload()
    setter.unload()
