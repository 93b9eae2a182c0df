"""Contract tests: each repository and store runs the same test against the in-memory fakes
(tests/fakes) and against moto, so the fakes the behaviour tests use cannot drift from the
emulator. Resources come from template.yaml on both backends.

The fake account is built afresh for every test (it costs microseconds). Building moto's costs
~0.2 s (its KMS key for the table alone is an RSA key), so one moto account serves a test module
and is emptied between tests: every item, object, message and schedule removed, the resources
themselves (as the template made them) kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends

from engram.kernel.settings import Settings, get_settings
from engram.wiring.stores import Stores, clients
from local.resources import Resources, create_resources
from local.template import load_template
from tests.fakes import fake_aws

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")


@dataclass
class Backend:
    kind: str  # "fake" or "moto"
    resources: Resources
    settings: Settings
    stores: Stores


@pytest.fixture(scope="module")
def moto_account() -> Iterator[Resources]:
    with mock_aws():
        yield create_resources(TEMPLATE)


def empty(resources: Resources) -> None:
    """Removes what a test left in the account, keeping the resources."""
    ddb = boto3.client("dynamodb", region_name=resources.region)
    for page in ddb.get_paginator("scan").paginate(TableName=resources.table_name(), ProjectionExpression="PK, SK"):
        for item in page["Items"]:
            ddb.delete_item(TableName=resources.table_name(), Key=item)
    s3 = boto3.client("s3", region_name=resources.region)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=resources.bucket_name()):
        for obj in page.get("Contents", []):
            s3.delete_object(Bucket=resources.bucket_name(), Key=obj["Key"])
    # Not PurgeQueue: SQS (and moto) allow one a minute, and a test of that rule must start clean.
    for queue in sqs_backends[DEFAULT_ACCOUNT_ID][resources.region].queues.values():
        with queue._messages_lock:
            queue._messages, queue._pending_messages, queue.last_purged_at = [], set(), None
    scheduler = boto3.client("scheduler", region_name=resources.region)
    for group in scheduler.list_schedule_groups()["ScheduleGroups"]:
        for schedule in scheduler.list_schedules(GroupName=group["Name"])["Schedules"]:
            scheduler.delete_schedule(Name=schedule["Name"], GroupName=group["Name"])
        if group["Name"] not in ("default", resources.schedule_group()):
            scheduler.delete_schedule_group(Name=group["Name"])


@pytest.fixture(params=["fake", "moto"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    """The template's resources on one backend, with the stores of the API function over them."""
    if request.param == "fake":
        with fake_aws():
            yield from _backend("fake", create_resources(TEMPLATE), monkeypatch)
    else:
        resources: Resources = request.getfixturevalue("moto_account")
        empty(resources)
        yield from _backend("moto", resources, monkeypatch)


def _backend(kind: str, resources: Resources, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    for key, value in {**resources.env(), **resources.env("ApiFunction")}.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    settings = get_settings()
    try:
        yield Backend(kind, resources, settings, Stores(**clients(settings)))
    finally:
        get_settings.cache_clear()
