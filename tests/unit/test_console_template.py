"""The console's sign-in in template.yaml: with the created user pool, a managed-login domain, a
public client of the console's own that the API's authorizer accepts, and the custom resource that
gives that client the API's URL as its callback (least privilege: that pool's clients only)."""

from __future__ import annotations

from local.template import load_template

TEMPLATE = load_template()
RESOURCES = TEMPLATE.resources
POOL_PIECES = ("UserPoolDomain", "ConsoleClient", "ConsoleLoginBranding", "ConsoleLoginFunction", "ConsoleLogin")


def _props(logical_id: str) -> dict:
    return RESOURCES[logical_id]["Properties"]


def test_pool_pieces_exist_only_with_the_created_pool():
    for logical_id in POOL_PIECES:
        assert RESOURCES[logical_id]["Condition"] == "CreateUserPool", logical_id
    assert _props("UserPoolDomain")["ManagedLoginVersion"] == 2
    assert _props("ConsoleLoginBranding")["ClientId"] == {"Ref": "ConsoleClient"}


def test_the_console_client_is_public_and_the_authorizer_accepts_it():
    client = _props("ConsoleClient")
    assert client["GenerateSecret"] is False  # a browser cannot keep a secret: PKCE instead
    assert client["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]  # no password flow from the page
    assert _props("HttpApi")["Auth"]["DefaultAuthorizer"] == "EngramAuthorizer"
    audience = _props("AuthorizerFunction")["Environment"]["Variables"]["AUTH_AUDIENCE"]
    assert audience["Fn::If"][1] == {"Fn::Sub": "${UserPoolClient},${ConsoleClient},${McpClient}"}  # and /mcp's client (MX4)


def test_the_custom_resource_gives_the_client_the_api_url_and_may_touch_nothing_else():
    login = _props("ConsoleLogin")
    assert login["ServiceToken"] == {"Fn::GetAtt": ["ConsoleLoginFunction", "Arn"]}
    assert login["ClientId"] == {"Ref": "ConsoleClient"} and login["UserPoolId"] == {"Ref": "UserPool"}
    assert login["Url"] == {"Fn::Sub": "https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}/"}
    (policy,) = _props("ConsoleLoginFunction")["Policies"]
    (statement,) = policy["Statement"]
    assert set(statement["Action"]) == {"cognito-idp:DescribeUserPoolClient", "cognito-idp:UpdateUserPoolClient"}
    assert statement["Resource"] == {"Fn::GetAtt": ["UserPool", "Arn"]}


def test_the_api_tells_the_console_how_to_sign_in():
    env = TEMPLATE.function("ApiFunction").environment
    assert env["CONSOLE_SIGN_IN"] == {"Fn::If": ["CreateUserPool", "managed-login", "token"]}
    assert env["CONSOLE_CLIENT_ID"] == {"Fn::If": ["CreateUserPool", {"Ref": "ConsoleClient"}, ""]}
    login_url = env["CONSOLE_LOGIN_URL"]["Fn::If"]
    assert login_url[1] == {"Fn::Sub": "https://${UserPoolDomain}.auth.${AWS::Region}.amazoncognito.com"}
    assert login_url[2] == ""


def test_the_custom_resource_function_is_a_deploy_helper_the_local_stack_leaves_out():
    assert TEMPLATE.deploy_helpers() == {"ConsoleLoginFunction"}
    assert "ConsoleLoginFunction" not in {spec.logical_id for spec in TEMPLATE.functions()}
