"""Personal API keys (MX2): created, listed and revoked by their owner; checked by the authorizer."""
