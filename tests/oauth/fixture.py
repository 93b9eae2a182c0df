"""A real OAuth authorization server (oidc-provider, tests/oauth/server.mjs) and a real MCP server
that accepts only its access tokens for itself (audience-bound JWTs), both on loopback.

    issuer = AuthorizationServer.start(resources=[{"resource": url, "scope": "tools", "ttl": 5}])
    mcp = protected_mcp_server(issuer, port)        # the sample tools behind a bearer token
    final_url = issuer.sign_in(authorization_url)   # a browser that signs in and consents

`npm ci` installs the server's pinned packages the first time (package-lock.json).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_INSTALL_LOCK = threading.Lock()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def install() -> None:
    """`npm ci` in tests/oauth once (the lockfile pins oidc-provider and its dependencies)."""
    with _INSTALL_LOCK:
        marker = HERE / "node_modules" / "oidc-provider" / "package.json"
        lock = HERE / "package-lock.json"
        if marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime:
            return
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is needed for the OAuth tests (node 20+)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=HERE, check=True, timeout=600)
        marker.touch()


@dataclass
class AuthorizationServer:
    issuer: str
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        *,
        resources: list[dict[str, Any]],
        clients: list[dict[str, Any]] | None = None,
        account: str = "user-1",
        port: int = 0,
        client_id_metadata_documents: bool = False,
        registration: bool = True,
    ) -> AuthorizationServer:
        install()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "OAUTH_PORT": str(port),
            "OAUTH_RESOURCES": json.dumps(resources),
            "OAUTH_CLIENTS": json.dumps(clients or []),
            "OAUTH_ACCOUNT": account,
            "OAUTH_CIMD": "1" if client_id_metadata_documents else "0",
            "OAUTH_REGISTRATION": "1" if registration else "0",
            "NODE_ENV": "test",
        }
        process = subprocess.Popen(
            ["node", str(HERE / "server.mjs")],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            err = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"the authorization server did not start: {err}")
        server = cls(issuer=json.loads(line)["issuer"], process=process)
        threading.Thread(target=server._drain, daemon=True).start()
        return server

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.issuer + "/_events", timeout=10) as response:
            found: list[dict[str, Any]] = json.loads(response.read())
        return [e for e in found if kind is None or e["kind"] == kind]

    def sign_in(self, authorization_url: str, *, stop_at: str) -> str:
        """What a person's browser does: opens the authorization URL, signs in and consents (the
        server's interactions finish by themselves), and follows redirects until one leads to a
        URL starting with `stop_at` (the client's redirect URI), which it returns unopened."""
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())
        url = authorization_url
        for _ in range(20):
            if url.startswith(stop_at):
                return url
            try:
                with opener.open(url, timeout=10) as response:
                    raise AssertionError(f"the authorization server answered {response.status} without a redirect at {url}")
            except urllib.error.HTTPError as err:
                if err.code not in (302, 303, 307):
                    raise AssertionError(f"the authorization server answered {err.code} at {url}: {err.read()[:500]!r}") from None
                url = urllib.parse.urljoin(url, err.headers["location"])
        raise AssertionError("too many redirects")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class AudienceBoundVerifier:
    """Accepts a JWT access token signed by the issuer's keys (its JWKS), unexpired, for the
    audience `resource` only (RFC 8707 / RFC 9068): a token for another resource is refused."""

    def __init__(self, issuer: str, resource: str):
        import jwt

        self.issuer, self.resource = issuer, resource
        self._keys = jwt.PyJWKClient(issuer + "/jwks")
        self.accepted: list[str] = []  # the tokens it let in
        self.refuse = False  # a test sets it: every token refused, as after a revocation

    async def verify_token(self, token: str) -> Any:
        import anyio
        import jwt
        from mcp.server.auth.provider import AccessToken

        if self.refuse:
            return None
        try:
            key = await anyio.to_thread.run_sync(self._keys.get_signing_key_from_jwt, token)
            claims = jwt.decode(token, key.key, algorithms=["RS256"], audience=self.resource, issuer=self.issuer)
        except jwt.PyJWTError:
            return None
        self.accepted.append(token)
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=self.resource,
            subject=str(claims.get("sub")),
        )


@dataclass
class ProtectedServer:
    url: str
    verifier: AudienceBoundVerifier
    running: Any

    def stop(self) -> None:
        self.running.stop()


def protected_mcp_server(issuer: str, port: int, *, scope: str = "tools") -> ProtectedServer:
    """The sample tools (local/sample_mcp.py) on the SDK's `MCPServer` with its bearer-token auth:
    401 with `WWW-Authenticate: Bearer resource_metadata=...` without a valid token, its
    protected resource metadata (RFC 9728) naming `issuer`."""
    from mcp.server.auth.settings import AuthSettings

    from local.sample_mcp import build_server, serve_app

    url = f"http://127.0.0.1:{port}/mcp"
    verifier = AudienceBoundVerifier(issuer, url)
    auth = AuthSettings(issuer_url=issuer, resource_server_url=url, required_scopes=[scope], validate_token_resource=True)
    server = build_server(auth=auth, token_verifier=verifier)
    app = server.streamable_http_app(json_response=True, stateless_http=True)
    running = serve_app(app, port=port)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not running.server.started:
        time.sleep(0.01)
    return ProtectedServer(url=url, verifier=verifier, running=running)
