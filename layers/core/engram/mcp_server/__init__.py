"""Engram's own MCP server (MX1): the caller's memory for other agents, at POST /mcp."""
