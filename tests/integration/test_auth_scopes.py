"""Scopes (template parameter AuthScopes -> REQUIRED_SCOPES): a token without every required scope
is a 403 `insufficient_scope` on every route, before anything is read or written."""

from __future__ import annotations

from engram.api.http import _granted_scopes
from local.resources import Resolver
from tests.integration.conftest import TEMPLATE


def test_the_created_user_pool_requires_its_access_tokens_scope(stack):
    # template.yaml's default (no AuthIssuer, no AuthScopes): the created pool's access-token scope
    assert stack.deps.settings.required_scopes == "aws.cognito.signin.user.admin"
    assert stack.call("GET", "/api/agents").status == 200  # the local authorizer's token carries it


def test_a_token_without_a_required_scope_is_refused_and_nothing_is_written(stack):
    stack.deps.settings = stack.deps.settings.model_copy(update={"required_scopes": "engram/api"})
    created = stack.call("POST", "/api/agents", body={"name": "Nope"})
    assert created.status == 403
    assert created.error["code"] == "insufficient_scope" and "engram/api" in created.error["message"]
    stack.deps.settings = stack.deps.settings.model_copy(update={"required_scopes": ""})
    assert stack.call("GET", "/api/agents").data["items"] == []


def test_scopes_given_as_a_parameter_reach_the_functions():
    env = TEMPLATE.function_globals["Environment"]["Variables"]["REQUIRED_SCOPES"]
    given = Resolver(TEMPLATE, {}, region="us-east-1", parameters={"AuthScopes": ["engram/api", "engram/admin"]})
    assert given.resolve(env) == "engram/api engram/admin"
    external = Resolver(TEMPLATE, {}, region="us-east-1", parameters={"AuthIssuer": "https://issuer.example.com"})
    assert external.resolve(env) == ""  # an external issuer: no scope check unless AuthScopes is set


def test_scope_claims_are_read_in_the_shapes_issuers_send():
    assert _granted_scopes({"scope": "openid engram/api"}) == {"openid", "engram/api"}
    assert _granted_scopes({"scp": ["engram.read", "engram.write"]}) == {"engram.read", "engram.write"}
    assert _granted_scopes({"scp": "[engram.read engram.write]"}) == {"engram.read", "engram.write"}
    assert _granted_scopes({}) == set()
