"""Engram core: the domain, stores, memory, agent loop and model providers shared by every function."""
