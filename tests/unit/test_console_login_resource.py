"""The custom resource that turns on the console's managed login (functions/console_login): it
keeps the client's other settings, sets the code grant with the API's URL as callback, and always
answers CloudFormation, also when Cognito refuses."""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("console_login_app", ROOT / "functions" / "console_login" / "app.py")
assert _spec and _spec.loader
console_login = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(console_login)

URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/"
DESCRIBED = {
    "UserPoolId": "eu-west-1_pool",
    "ClientName": "engram-console",
    "ClientId": "client1",
    "LastModifiedDate": "2026-11-23T00:00:00Z",
    "CreationDate": "2026-11-23T00:00:00Z",
    "RefreshTokenValidity": 30,
    "ExplicitAuthFlows": ["ALLOW_REFRESH_TOKEN_AUTH"],
    "PreventUserExistenceErrors": "ENABLED",
    "EnableTokenRevocation": True,
    "AuthSessionValidity": 3,
}


class FakeCognito:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.updates: list[dict[str, Any]] = []

    def describe_user_pool_client(self, UserPoolId: str, ClientId: str) -> dict[str, Any]:
        if self.fail:
            raise RuntimeError("ResourceNotFoundException: no such client")
        return {"UserPoolClient": {**DESCRIBED, "UserPoolId": UserPoolId, "ClientId": ClientId}}

    def update_user_pool_client(self, **kwargs: Any) -> dict[str, Any]:
        self.updates.append(kwargs)
        return {"UserPoolClient": kwargs}


@pytest.fixture
def cloudformation():
    """CloudFormation's presigned response URL: records the PUT bodies."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/response", received
    server.shutdown()


def _event(kind: str, response_url: str) -> dict[str, Any]:
    return {
        "RequestType": kind,
        "ResponseURL": response_url,
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/engram/uuid",
        "RequestId": "req-1",
        "LogicalResourceId": "ConsoleLogin",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:...",
            "UserPoolId": "eu-west-1_pool",
            "ClientId": "client1",
            "Url": URL,
            "Scopes": ["aws.cognito.signin.user.admin", ""],
        },
    }


def test_create_sets_the_code_grant_on_the_api_url_and_keeps_the_rest(cloudformation):
    url, received = cloudformation
    cognito = FakeCognito()
    console_login.lambda_handler(_event("Create", url), None, client=cognito)
    (update,) = cognito.updates
    assert update["CallbackURLs"] == [URL] and update["LogoutURLs"] == [URL]
    assert update["AllowedOAuthFlows"] == ["code"] and update["AllowedOAuthFlowsUserPoolClient"] is True
    assert update["AllowedOAuthScopes"] == ["openid", "email", "aws.cognito.signin.user.admin"]
    assert update["SupportedIdentityProviders"] == ["COGNITO"]
    # What it did not come to change is passed back as it was (an update resets what it omits).
    assert update["RefreshTokenValidity"] == 30 and update["EnableTokenRevocation"] is True
    assert update["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]
    assert "CreationDate" not in update and "LastModifiedDate" not in update
    (answer,) = received
    assert answer["Status"] == "SUCCESS"
    assert answer["PhysicalResourceId"] == "eu-west-1_pool/client1"
    assert (answer["RequestId"], answer["LogicalResourceId"]) == ("req-1", "ConsoleLogin")


def test_delete_changes_nothing_and_a_refusal_is_reported_not_hung(cloudformation):
    url, received = cloudformation
    cognito = FakeCognito()
    console_login.lambda_handler(_event("Delete", url), None, client=cognito)
    assert cognito.updates == [] and received[-1]["Status"] == "SUCCESS"
    console_login.lambda_handler(_event("Update", url), None, client=FakeCognito(fail=True))
    assert received[-1]["Status"] == "FAILED"
    assert "no such client" in received[-1]["Reason"]
