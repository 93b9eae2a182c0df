"""The local stack's HTTP front: a browser that goes away mid-response is one quiet line."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler

import pytest

from local.stack import _HttpServer


def _fail_with(server: _HttpServer, err: Exception) -> None:
    try:
        raise err
    except Exception:
        server.handle_error(None, ("127.0.0.1", 50123))


def test_a_client_gone_mid_response_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    server = _HttpServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        with caplog.at_level(logging.INFO, logger="local"):
            _fail_with(server, BrokenPipeError(32, "Broken pipe"))
            _fail_with(server, ConnectionResetError(104, "Connection reset by peer"))
        assert capsys.readouterr().err == ""
        quiet = [r.getMessage() for r in caplog.records if r.name == "local"]
        assert quiet == [
            "client 127.0.0.1 disconnected before the response was sent (BrokenPipeError)",
            "client 127.0.0.1 disconnected before the response was sent (ConnectionResetError)",
        ]
        _fail_with(server, ValueError("a real bug"))  # anything else keeps its traceback
        assert "Traceback" in capsys.readouterr().err
    finally:
        server.server_close()
