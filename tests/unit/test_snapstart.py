"""SnapStart (issue 12, item 1): a template parameter turns it on for the four functions, which are
always invoked through a published `live` alias; every function registers Lambda's runtime hooks,
which build the deferred validators and warm botocore before the snapshot (capturing no credential
or connection) and give each restored environment its own seed and its own dependencies."""

from __future__ import annotations

import pytest

from local.template import load_template
from tests.handler_probe import import_handler

FUNCTIONS = ("ApiFunction", "ChatFunction", "ExtractFunction", "HeartbeatFunction")

# Lambda's managed runtimes ship this module; a stand-in that records the hooks and runs them.
_FAKE_HOOKS = """
before, after = [], []
def register_before_snapshot(func, *args, **kwargs):
    before.append((func, args, kwargs))
def register_after_restore(func, *args, **kwargs):
    after.append((func, args, kwargs))
def snapshot():
    return [func(*args, **kwargs) for func, args, kwargs in reversed(before)]
def restore():
    for func, args, kwargs in after:
        func(*args, **kwargs)
"""

_SNAPSHOT_THEN_RESTORE = """
import random, boto3, snapshot_restore_py as hooks
print(module.ROOT.snapstart, len(hooks.before), len(hooks.after))
(primed,) = hooks.snapshot()
print(primed["validators"] > 0, primed["clients"], primed["detector"] > 20, boto3.DEFAULT_SESSION._session._credentials is None)
from engram.agents.models import Agent
print(Agent.__pydantic_complete__)
deps = module.ROOT.deps
state = random.getstate()
hooks.restore()
first = random.random()
random.setstate(state)  # a second environment resumed from the same snapshot
hooks.restore()
print(first != random.random(), module.ROOT.deps is not deps)
"""


def _env(function: str, **extra: str) -> dict[str, str]:
    return {
        "MODEL_PROVIDER": "offline",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "ERROR",  # the probe reads what it prints, not the log
        "AWS_LAMBDA_FUNCTION_NAME": f"engram-{function}",
        "TABLE_NAME": "engram-table",
        "BUCKET_NAME": "engram-bucket",
        **extra,
    }


@pytest.mark.parametrize("function", ["api", "chat", "extract", "heartbeat"])
def test_every_function_primes_its_snapshot_and_refreshes_after_restore(function, tmp_path):
    (tmp_path / "snapshot_restore_py.py").write_text(_FAKE_HOOKS)
    printed = import_handler(function, _SNAPSHOT_THEN_RESTORE, **_env(function, PYTHONPATH=str(tmp_path)))
    registered, primed, no_credentials, built, reseeded, rebuilt = (
        printed[0:3],
        printed[3:6],
        printed[6],
        printed[7],
        printed[8],
        printed[9],
    )
    assert registered == ["True", "1", "1"]  # one hook each way
    # validators built; dynamodb, s3, sqs, scheduler, secretsmanager; the secret detector's rules loaded
    assert primed == ["True", "5", "True"]
    assert no_credentials == "True"  # the snapshot holds no credential of the publishing environment
    assert built == "True"  # a request model's validator is in the snapshot
    assert (reseeded, rebuilt) == ("True", "True")  # own random state, own clients after a restore


def test_without_the_runtime_hooks_nothing_is_registered():
    printed = import_handler("api", "print(module.ROOT.snapstart)", **_env("api"))
    assert printed[-1] == "False"


def test_the_template_invokes_every_function_through_its_alias_and_snapstart_is_a_parameter():
    template = load_template()
    assert template.parameters["SnapStart"]["Default"] == "false"
    assert template.conditions["WantSnapStart"] == {"Fn::Equals": [{"Ref": "SnapStart"}, "true"]}
    for name in FUNCTIONS:
        props = template.resources[name]["Properties"]
        assert props["AutoPublishAlias"] == "live"
        # a new layer version (the code) publishes new versions, so `live` never runs the old code
        assert props["AutoPublishAliasAllProperties"] is True
        assert props["SnapStart"] == {"ApplyOn": {"Fn::If": ["WantSnapStart", "PublishedVersions", "None"]}}
    assert template.resources["CoreLayer"]["Properties"]["PublishLambdaVersion"] is True
    # schedules the API creates name the alias (SAM points HTTP routes and queues at it)
    api_env = template.resources["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api_env["HEARTBEAT_FUNCTION_ARN"] == {"Ref": "HeartbeatFunction.Alias"}


def test_pydantic_looks_for_no_plugins_in_the_functions():
    env = load_template().function_globals["Environment"]["Variables"]
    assert env["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
