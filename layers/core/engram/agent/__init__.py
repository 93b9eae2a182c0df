"""The agent: prompt composition, the tool registry and the tool loop."""
