"""Long turns and the WebSocket API in template.yaml (issue 23): the turn budget below the chat
function's timeout, the WEBSOCKET API's routes to the chat function, and ManageConnections scoped
to that API's connections only."""

from __future__ import annotations

from local.template import load_template
from tests.unit.test_heartbeat_template import _actions, _props, _statements

TEMPLATE = load_template()
RESOURCES = TEMPLATE.resources


def test_long_turns_get_their_own_budget_below_the_chat_functions_timeout():
    budget = TEMPLATE.parameters["TurnBudgetSeconds"]
    chat = _props("ChatFunction")
    assert chat["Environment"]["Variables"]["TURN_BUDGET_SECONDS"] == {"Ref": "TurnBudgetSeconds"}
    # the failure grace (3 s) and the after-commit work fit between the largest budget and the timeout
    assert budget["MaxValue"] + 20 <= chat["Timeout"] and budget["Default"] < budget["MaxValue"]
    assert _props("TurnQueue")["VisibilityTimeout"] == 6 * chat["Timeout"]


def test_the_websocket_api_routes_connect_disconnect_and_default_to_the_chat_function():
    assert _props("StreamApi")["ProtocolType"] == "WEBSOCKET"
    routes = {p["RouteKey"]: p for r in RESOURCES.values() if r["Type"] == "AWS::ApiGatewayV2::Route" for p in [r["Properties"]]}
    assert set(routes) == {"$connect", "$disconnect", "$default"}
    assert {str(p["Target"]) for p in routes.values()} == {str({"Fn::Sub": "integrations/${StreamIntegration}"})}
    uri = _props("StreamIntegration")["IntegrationUri"]["Fn::Sub"]
    assert uri[1] == {"Alias": {"Ref": "ChatFunction.Alias"}}
    assert _props("StreamInvokePermission")["FunctionName"] == {"Ref": "ChatFunction.Alias"}
    assert _props("StreamDefaultRouteResponse")["RouteId"] == {"Ref": "StreamDefaultRoute"}


def test_only_the_turn_runners_may_post_and_only_to_this_apis_connections():
    scoped = {
        "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${StreamApi}/live/POST/@connections/*"
    }
    for function_id in ("ChatFunction", "HeartbeatFunction"):
        statement = _statements(function_id)["StreamEvents"]
        assert _actions(statement) == {"execute-api:ManageConnections"} and statement["Resource"] == scoped
    for function_id in ("ApiFunction", "ExtractFunction"):
        assert "StreamEvents" not in _statements(function_id)
    # Closing sockets (MX6): the API (a key revoked, the account deleted), the chat function (a
    # socket's key expired); DELETE only.
    closing = {"Fn::Sub": scoped["Fn::Sub"].replace("/POST/", "/DELETE/")}
    for function_id in ("ApiFunction", "ChatFunction"):
        statement = _statements(function_id)["CloseSockets"]
        assert _actions(statement) == {"execute-api:ManageConnections"} and statement["Resource"] == closing
    for function_id in ("ExtractFunction", "HeartbeatFunction"):
        assert "CloseSockets" not in _statements(function_id)
    assert "StreamUrl" in TEMPLATE.data["Outputs"]
