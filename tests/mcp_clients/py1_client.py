"""One MCP session against Engram's /mcp with the Python SDK 1.x client (streamablehttp_client +
ClientSession), printed as JSON, for tests/e2e/test_mcp_conformance.py. Runs in its own venv
(.cache/mcp-clients-py1-venv); the credential comes from ENGRAM_MCP_AUTH."""

import json
import logging
import os
import sys

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


class _Kept(logging.Handler):
    """The SDK's own warnings and errors (a failed GET stream, a bad response): the transport's errors."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def main(url: str) -> dict:
    kept = _Kept()
    logging.getLogger("mcp").addHandler(kept)
    out: dict = {"transportErrors": kept.messages}
    headers = {"Authorization": os.environ["ENGRAM_MCP_AUTH"]}
    async with streamablehttp_client(url, headers=headers) as (read, write, _), ClientSession(read, write) as session:
        init = await session.initialize()
        out["serverInfo"] = init.serverInfo.model_dump()
        out["protocolVersion"] = init.protocolVersion
        out["tools"] = [t.model_dump(by_alias=True, exclude_none=True) for t in (await session.list_tools()).tools]
        calls = {
            "remember": ("remember", {"fact": "I test with py1", "topic": "testing"}),
            "listFacts": ("list_facts", {}),
            "badArgument": ("list_facts", {"limit": "many"}),
            "unknownArgument": ("list_facts", {"limt": 3}),
        }
        for name, (tool, arguments) in calls.items():
            out[name] = (await session.call_tool(tool, arguments)).model_dump(by_alias=True, exclude_none=True)
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1])))
