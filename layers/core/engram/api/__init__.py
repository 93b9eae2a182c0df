"""HTTP routes (powertools Routers), the response envelope and the one error-to-status mapping."""
