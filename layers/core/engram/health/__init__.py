"""GET /api/health: is the stack ready for a first conversation (no token, no secrets shown)."""
