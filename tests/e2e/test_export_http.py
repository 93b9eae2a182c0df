"""Account export over HTTP against the local stack: POST starts the job, the run-queue worker
writes the file to moto's S3, GET hands out a presigned URL the user downloads directly."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request

from tests.e2e.test_local_stack_http import http, new_agent

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback never goes through a proxy


def _wait_for_export(url: str, export_id: str, attempts: int = 300) -> dict:
    for _ in range(attempts):
        status, body = http(url, "GET", f"/api/me/export/{export_id}")
        assert status == 200, body
        if body["data"]["status"] in ("succeeded", "failed"):
            return body["data"]
        time.sleep(0.1)
    raise AssertionError(f"export {export_id} did not finish: {body}")


def test_export_file_downloads_through_the_presigned_url(live):
    url = live.url.rstrip("/")
    agent = new_agent(url)
    assert http(url, "POST", f"/api/agents/{agent['id']}/sessions/dashboard/messages", body={"message": "hello export"})[0] == 200
    http(url, "POST", "/api/me/facts", body={"fact": "I keep bees"})
    other = new_agent(url, user="bob")
    http(url, "POST", f"/api/agents/{other['id']}/sessions/dashboard/messages", user="bob", body={"message": "bob only"})

    status, started = http(url, "POST", "/api/me/export")
    assert status == 202 and started["data"]["status"] == "queued", started
    job = _wait_for_export(url, started["data"]["exportId"])
    assert job["status"] == "succeeded", job

    # The URL points at the emulator (moto on loopback), is signed, and needs no bearer token.
    link = urllib.parse.urlsplit(job["downloadUrl"])
    assert f"{link.scheme}://{link.netloc}" == live.moto_url
    with _DIRECT.open(job["downloadUrl"], timeout=30) as response:
        assert response.status == 200
        assert "attachment" in response.headers["content-disposition"]
        body = response.read()
    assert len(body) == job["bytes"]
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert lines[0]["type"] == "export" and lines[-1] == {"type": "end", "data": {"counts": job["counts"]}}
    types = {line["type"] for line in lines}
    assert {"agent", "session", "message", "run", "usage", "fact"} <= types
    assert any(line["type"] == "message" and "hello export" in json.dumps(line) for line in lines)
    assert "bob only" not in body.decode()

    # Bob cannot see Alice's job (moto does not check S3 signatures, so that part is AWS's).
    assert http(url, "GET", f"/api/me/export/{job['id']}", user="bob")[0] == 404

    # Deleting the account deletes the file too.
    assert http(url, "DELETE", "/api/me")[1]["data"]["deleted"]["exports"] == 1
    try:
        _DIRECT.open(job["downloadUrl"], timeout=30)
        raise AssertionError("the export outlived the account")
    except urllib.error.HTTPError as err:
        assert err.code in (403, 404)  # moto answers a presigned GET of a missing key with 403
