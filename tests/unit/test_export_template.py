"""Account exports in template.yaml: the files expire as the setting says, the API may only read
and delete them, the worker may only write them, and the routes are there."""

from __future__ import annotations

from engram.kernel.settings import Settings
from local.template import load_template
from tests.unit.test_heartbeat_template import _actions, _props, _statements

TEMPLATE = load_template()


def _export_statements(function_id: str) -> dict[str, dict]:
    return {sid: s for sid, s in _statements(function_id).items() if "exports/" in str(s)}


def test_export_files_expire_with_their_job_rows():
    rules = {r["Id"]: r for r in _props("StateBucket")["LifecycleConfiguration"]["Rules"]}
    rule = rules["ExpireExports"]
    assert rule["Status"] == "Enabled" and rule["Prefix"] == "exports/"
    assert rule["ExpirationInDays"] == Settings().export_retention_days


def test_the_api_reads_and_deletes_exports_and_the_worker_writes_them():
    api = _export_statements("ApiFunction")
    assert _actions(api["Exports"]) == {"s3:GetObject", "s3:DeleteObject"}
    assert api["Exports"]["Resource"] == {"Fn::Sub": "${StateBucket.Arn}/exports/*"}
    assert api["ListExports"]["Condition"] == {"StringLike": {"s3:prefix": "exports/*"}}
    worker = _export_statements("HeartbeatFunction")
    assert set(worker) == {"WriteExports"}
    assert _actions(worker["WriteExports"]) == {"s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"}
    assert _export_statements("ChatFunction") == {} and _export_statements("ExtractFunction") == {}


def test_export_routes_belong_to_the_api_function():
    routes = {(r.method, r.path) for r in TEMPLATE.function("ApiFunction").routes}
    assert {("POST", "/api/me/export"), ("GET", "/api/me/export/{exportId}"), ("GET", "/api/me/export")} <= routes
