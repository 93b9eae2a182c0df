"""The Messages API as the anthropic SDK sees it over a mocked HTTP transport (httpx2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2

from engram.engine.providers.anthropic_provider import AnthropicProvider
from engram.kernel.settings import Settings


def reply(
    content: list[dict[str, Any]], *, stop: str = "end_turn", model: str = "claude-sonnet-4-6", **usage: int
) -> dict[str, Any]:
    """A Messages API answer body; `usage` defaults to 10 tokens in, 2 out."""
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 2},
    }


def recording(bodies: list[dict[str, Any]], answer: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """A transport handler that keeps each request body and answers with `answer(body)`."""

    def handler(request: Any) -> Any:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx2.Response(200, json=answer(body))

    return handler


def provider(settings: Settings, handler: Any, cls: type[AnthropicProvider] = AnthropicProvider) -> AnthropicProvider:
    return cls(settings, http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def sse(body: dict[str, Any], *, piece: int = 5) -> Any:
    """`body` (a Messages API answer) as the API streams it: server-sent events, text in pieces of
    `piece` characters, tool inputs as partial JSON."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {**body, "content": [], "stop_reason": None}})
    ]
    for i, block in enumerate(body["content"]):
        if block["type"] == "text":
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": i, "content_block": {**block, "text": ""}})
            )
            for start in range(0, len(block["text"]), piece):
                delta = {"type": "text_delta", "text": block["text"][start : start + piece]}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        else:
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}})
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input") or {})}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    end = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    events.append(
        ("message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": body["usage"]["output_tokens"]}})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())


def bedrock_stream(body: dict[str, Any], *, piece: int = 5) -> Any:
    """`body` as Bedrock's InvokeModelWithResponseStream sends it: the same events as `sse`, each
    base64'd in a `chunk` of the AWS event stream encoding (prelude, headers, payload, CRC32s)."""
    import base64
    import binascii
    import struct

    def header(name: str, value: str) -> bytes:
        raw = value.encode()
        return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw

    frames = b""
    for block in sse(body, piece=piece).content.decode().split("\n\n"):
        if not block.strip():
            continue
        data = block.split("data: ", 1)[1]
        payload = json.dumps({"bytes": base64.b64encode(data.encode()).decode()}).encode()
        headers = header(":event-type", "chunk") + header(":content-type", "application/json") + header(":message-type", "event")
        total = 12 + len(headers) + len(payload) + 4
        prelude = struct.pack(">II", total, len(headers))
        message = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers + payload
        frames += message + struct.pack(">I", binascii.crc32(message))
    return httpx2.Response(200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=frames)
