"""The scopes a JWT grants, in the shapes issuers send them."""

from __future__ import annotations

from collections.abc import Mapping


def granted_scopes(claims: Mapping[str, object]) -> set[str]:
    """`scope` (space-separated, RFC 8693; Cognito) or `scp` (a list or a string; Okta, Entra ID).
    API Gateway passes a list claim as its text `[a b]`."""
    granted: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, list):
            granted.update(str(v) for v in value)
        elif isinstance(value, str):
            granted.update(value.strip("[]").replace(",", " ").split())
    return granted
