"""`python -m tests.mcp_matrix`: makes the matrix's venvs and node_modules (make test runs it)."""

from tests.mcp_matrix import KINDS, prepare

prepare()
print("MCP conformance matrix ready: " + ", ".join(KINDS))
