"""Engram core: the domain, stores, memory, agent loop and model providers shared by every function."""

from engram.kernel import lazy_packages

# The release, as the MCP server and the client (clients/python) report it: one number for both.
__version__ = "0.1.0"

# Before any module of the core imports powertools' event handler (kernel.lazy_packages).
lazy_packages.install()
