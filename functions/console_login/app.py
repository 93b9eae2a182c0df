"""Custom resource (template.yaml `ConsoleLogin`): turns on the managed login of the console's user
pool client: the authorization code grant (the console adds PKCE), the API's own URL as its
callback and sign-out URL, and the scopes the API requires.

CloudFormation cannot set this on the client resource itself: the client's callback URL names the
API, and the API's JWT authorizer names the client (a cycle). So the client is created bare and
this function, which runs after both exist, describes it and updates it with the OAuth settings,
keeping every other setting as it is (UpdateUserPoolClient resets what it is not given).
On Delete it does nothing: the client is deleted with the stack.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

# What UpdateUserPoolClient takes besides the ids (DescribeUserPoolClient returns these and more).
UPDATABLE = (
    "ClientName",
    "RefreshTokenValidity",
    "AccessTokenValidity",
    "IdTokenValidity",
    "TokenValidityUnits",
    "ReadAttributes",
    "WriteAttributes",
    "ExplicitAuthFlows",
    "SupportedIdentityProviders",
    "CallbackURLs",
    "LogoutURLs",
    "DefaultRedirectURI",
    "AllowedOAuthFlows",
    "AllowedOAuthScopes",
    "AllowedOAuthFlowsUserPoolClient",
    "AnalyticsConfiguration",
    "PreventUserExistenceErrors",
    "EnableTokenRevocation",
    "EnablePropagateAdditionalUserContextData",
    "AuthSessionValidity",
    "RefreshTokenRotation",
)


def oauth_update(described: dict[str, Any], url: str, scopes: list[str]) -> dict[str, Any]:
    """The UpdateUserPoolClient request: the client as it is, plus the console's managed login."""
    update = {key: described[key] for key in UPDATABLE if key in described}
    update.update(
        UserPoolId=described["UserPoolId"],
        ClientId=described["ClientId"],
        CallbackURLs=[url],
        LogoutURLs=[url],
        DefaultRedirectURI=url,
        AllowedOAuthFlows=["code"],
        AllowedOAuthFlowsUserPoolClient=True,
        AllowedOAuthScopes=list(dict.fromkeys(["openid", "email", *[s for s in scopes if s]])),
        SupportedIdentityProviders=["COGNITO"],
    )
    return update


def lambda_handler(event: dict[str, Any], context: Any, client: Any = None) -> None:
    props = event.get("ResourceProperties") or {}
    physical_id = f"{props.get('UserPoolId', 'pool')}/{props.get('ClientId', 'client')}"
    status, reason = "SUCCESS", ""
    try:
        if event["RequestType"] in ("Create", "Update"):
            if client is None:
                import boto3  # the Lambda runtime's own boto3

                client = boto3.client("cognito-idp")
            described = client.describe_user_pool_client(UserPoolId=props["UserPoolId"], ClientId=props["ClientId"])
            scopes = [str(s) for s in props.get("Scopes") or []]
            client.update_user_pool_client(**oauth_update(described["UserPoolClient"], str(props["Url"]), scopes))
    except Exception as err:  # any failure must reach CloudFormation, or the stack waits an hour
        status, reason = "FAILED", f"{type(err).__name__}: {err}"[:900]
    respond(event, context, status, reason, physical_id)


def respond(event: dict[str, Any], context: Any, status: str, reason: str, physical_id: str) -> None:
    log_stream = getattr(context, "log_stream_name", "")
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason or f"see CloudWatch log stream {log_stream}",
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": {},
        }
    ).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT", headers={"content-type": ""})
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()
