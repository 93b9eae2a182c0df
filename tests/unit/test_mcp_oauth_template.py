"""MX4 in template.yaml: the pre-registered OAuth client of /mcp (public, code flow with PKCE, the
redirect allowlist: Claude's and ChatGPT's callbacks and a loopback one), trusted by the
authorizer and by POST /mcp (AUTH_AUDIENCE), named in the outputs; the metadata routes open."""

from __future__ import annotations

import json

from local.template import load_template
from tests.unit.test_heartbeat_template import _props

TEMPLATE = load_template()


def test_the_mcp_client_is_public_code_flow_and_its_callbacks_are_the_allowlist():
    client = _props("McpClient")
    assert client["GenerateSecret"] is False and client["AllowedOAuthFlows"] == ["code"]
    assert client["AllowedOAuthFlowsUserPoolClient"] is True and client["EnableTokenRevocation"] is True
    assert client["CallbackURLs"] == [
        "https://claude.ai/api/mcp/auth_callback",
        "https://claude.com/api/mcp/auth_callback",
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "http://localhost:8976/callback",
    ]
    # What a token must carry on /mcp (REQUIRED_SCOPES with the created pool) is a scope it may ask.
    assert "aws.cognito.signin.user.admin" in client["AllowedOAuthScopes"]


def test_the_authorizer_and_the_mcp_route_take_its_tokens():
    for function_id in ("AuthorizerFunction", "ApiFunction"):
        audience = _props(function_id)["Environment"]["Variables"]["AUTH_AUDIENCE"]
        assert "${McpClient}" in str(audience), function_id
    assert TEMPLATE.data["Outputs"]["McpClientId"]["Value"] == {"Ref": "McpClient"}


def test_client_registration_may_only_create_and_delete_app_clients_of_the_stacks_pool():
    """RFC 7591 onto Cognito (MX4): the api function creates, the sweeper deletes, nothing else."""
    template = TEMPLATE
    found: dict[str, set[str]] = {}
    for name, resource in template.data["Resources"].items():
        flat = json.dumps(resource.get("Properties", {}).get("Policies", []))
        actions = {a for a in ("cognito-idp:CreateUserPoolClient", "cognito-idp:DeleteUserPoolClient") if a in flat}
        if actions:
            found[name] = actions
    assert found == {
        "ApiFunction": {"cognito-idp:CreateUserPoolClient"},
        "HeartbeatFunction": {"cognito-idp:DeleteUserPoolClient"},
    }
    for name in found:
        policies = template.data["Resources"][name]["Properties"]["Policies"][0]["Statement"]
        for statement in policies:
            inner = statement["Fn::If"][1] if "Fn::If" in statement else statement
            if str(inner.get("Action", "")).startswith("cognito-idp:"):
                assert statement["Fn::If"][0] == "CreateUserPool"
                assert inner["Resource"] == {"Fn::GetAtt": ["UserPool", "Arn"]}
