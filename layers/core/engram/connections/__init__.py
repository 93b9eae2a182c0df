"""MCP tool connections (TL1-TL6): remote MCP servers a user registers and their agents call."""
