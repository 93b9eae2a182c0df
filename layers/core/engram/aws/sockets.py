"""The WebSocket API's management API (`execute-api:ManageConnections`): post to a connection,
close one."""

from __future__ import annotations

from typing import Any

from engram.aws import clients as aws_clients
from engram.aws.clients import make_client


class Gone(Exception):
    """The connection is no longer there (API Gateway's GoneException, 410)."""


def management_endpoint(stream_url: str) -> str:
    """The management API of a WebSocket API is its own URL over https (http locally)."""
    if stream_url.startswith("wss://"):
        return "https://" + stream_url.removeprefix("wss://")
    return "http://" + stream_url.removeprefix("ws://")


class SocketPusher:
    """Posts to the connections of one WebSocket API; its client is created on first use."""

    def __init__(self, stream_url: str, client: object = None, *, endpoint: str = ""):
        self.endpoint = endpoint or management_endpoint(stream_url)
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("apigatewaymanagementapi", endpoint_url=self.endpoint)
        return self._client

    def post(self, connection_id: str, data: bytes) -> None:
        try:
            self.client.post_to_connection(ConnectionId=connection_id, Data=data)
        except aws_clients.ClientError as err:
            if err.response.get("Error", {}).get("Code") == "GoneException":
                raise Gone(connection_id) from None
            raise

    def disconnect(self, connection_id: str) -> None:
        try:
            self.client.delete_connection(ConnectionId=connection_id)
        except aws_clients.ClientError as err:
            if err.response.get("Error", {}).get("Code") != "GoneException":
                raise
