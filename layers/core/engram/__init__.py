"""Engram core: the domain, stores, memory, agent loop and model providers shared by every function."""

# The release, as the MCP server and the client (clients/python) report it: one number for both.
__version__ = "0.1.0"
