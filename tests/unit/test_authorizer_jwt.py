"""The authorizer's JWT side (engram.apikeys.authorizer): the rules API Gateway's JWT authorizer
applied, with PyJWT against an issuer served on loopback (its discovery document and JWKS)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from engram.apikeys.authorizer import JwtVerifier, Refused, authorize, verifier_for
from engram.kernel.settings import Settings

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def issuer() -> Iterator[tuple[str, list[int]]]:
    """An issuer on loopback; the list counts the JWKS downloads."""
    fetched = [0]
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                body: dict[str, Any] = {"issuer": url, "jwks_uri": f"{url}/keys"}
            elif self.path == "/keys":
                fetched[0] += 1
                body = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url, fetched
    server.shutdown()
    server.server_close()


def _token(iss: str, *, key: Any = KEY, kid: str = "k1", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "user-1", "iss": iss, "iat": now, "exp": now + 300, **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm="RS256", headers={"kid": kid})


class _NoFailedAttempts:
    """The throttle's counter (tests/integration/test_key_lifetime.py tests the real one): never full here."""

    def failed_attempts(self, source: str, minute: int) -> int:
        return 0

    def note_failed_attempt(self, source: str, minute: int) -> None:
        pass


class NoKeys:
    settings = None
    api_keys = _NoFailedAttempts()
    oauth_clients = None


def _event(token: str) -> dict[str, Any]:
    return {"type": "REQUEST", "headers": {"authorization": f"Bearer {token}"}}


def test_a_cognito_access_token_passes_with_its_subject_and_scopes(issuer):
    url, fetched = issuer
    verifier = JwtVerifier(url, ["client-a", "client-b"])
    token = _token(url, client_id="client-b", scope="aws.cognito.signin.user.admin openid", token_use="access")
    answer = authorize(NoKeys(), _event(token), verifier)  # type: ignore[arg-type]
    assert answer == {
        "isAuthorized": True,
        "context": {"sub": "user-1", "via": "jwt", "scope": "aws.cognito.signin.user.admin openid"},
    }
    before = fetched[0]
    authorize(NoKeys(), _event(_token(url, aud="client-a")), verifier)  # type: ignore[arg-type]  # an ID token: aud
    assert fetched[0] == before  # the JWKS is kept


@pytest.mark.parametrize(
    "make",
    [
        lambda url: _token(url, aud="someone-else"),  # not one of the audiences
        lambda url: _token(url),  # no audience at all
        lambda url: _token("https://other.example.com", aud="client-a"),  # another issuer
        lambda url: _token(url, aud="client-a", exp=int(time.time()) - 60),  # expired
        lambda url: _token(url, aud="client-a", key=OTHER_KEY),  # not the issuer's signature
        lambda url: _token(url, aud="client-a", sub=None),  # no subject
        lambda url: jwt.encode(
            {"sub": "u", "iss": url, "aud": "client-a", "exp": int(time.time()) + 60}, "s" * 32, algorithm="HS256"
        ),
        lambda url: "not.a.jwt",
    ],
)
def test_tokens_api_gateway_refused_are_refused(issuer, make):
    url, _ = issuer
    with pytest.raises(Refused) as refused:
        JwtVerifier(url, ["client-a"]).claims(make(url))
    assert str(refused.value) == "Unauthorized"  # what API Gateway answers with 401


@pytest.mark.parametrize("header", ["", "Basic abc", "Bearer", "Bearer " + "x" * 9000])
def test_requests_without_a_bearer_token_are_refused(header):
    with pytest.raises(Refused):
        authorize(NoKeys(), {"headers": {"authorization": header}}, JwtVerifier("", []))  # type: ignore[arg-type]


def test_without_an_issuer_no_jwt_passes(issuer):
    url, _ = issuer
    with pytest.raises(Refused):
        JwtVerifier("", ["client-a"]).claims(_token(url, aud="client-a"))


def test_an_id_tokens_name_claim_is_handed_on_as_the_persons_name(issuer):
    """Issue 39, item 7: the name a sign-in token carries names the person's archived turns."""
    url, _ = issuer
    verifier = JwtVerifier(url, ["client-a"])
    named = authorize(NoKeys(), _event(_token(url, aud="client-a", name=" Caroline Smith ")), verifier)  # type: ignore[arg-type]
    assert named["context"]["name"] == "Caroline Smith"
    for odd in ("", "x" * 101, 42):
        answer = authorize(NoKeys(), _event(_token(url, aud="client-a", name=odd)), verifier)  # type: ignore[arg-type]
        assert "name" not in answer["context"]


def test_a_token_of_a_registered_client_passes_and_of_an_unknown_one_does_not(issuer):
    """Clients registered through RFC 7591 (engram.apikeys.oauth_clients) get Cognito access tokens
    whose client_id is theirs, outside the configured audiences: the registry decides."""
    url, _ = issuer
    verifier = JwtVerifier(url, ["client-a"])
    registry = {"dcr-1"}
    asked: list[str] = []

    def registered(client_id: str) -> bool:
        asked.append(client_id)
        return client_id in registry

    token = _token(url, client_id="dcr-1", scope="openid", token_use="access")
    assert verifier.claims(token, registered)["sub"] == "user-1"
    with pytest.raises(Refused):
        verifier.claims(token)  # without the registry, as where the stack registers no clients
    with pytest.raises(Refused):
        verifier.claims(_token(url, client_id="dcr-2", token_use="access"), registered)
    with pytest.raises(Refused):  # an ID token's aud is never looked up
        verifier.claims(_token(url, aud="dcr-1"), registered)
    assert verifier.claims(_token(url, client_id="client-a"), registered)["sub"] == "user-1"
    assert asked == ["dcr-1", "dcr-2"]  # the configured audiences need no read


def test_the_signing_keys_are_read_from_auth_jwks_url_where_the_issuer_cannot_be_reached(issuer):
    """The local stack's emulated user pool: the tokens name the pool's AWS issuer, whose discovery
    is out of reach; AUTH_JWKS_URL says where its keys are (moto serves them on loopback)."""
    url, fetched = issuer
    pool = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_local"
    token = _token(pool, client_id="client-a", token_use="access")
    settings = Settings(AUTH_ISSUER=pool, AUTH_AUDIENCE="client-a", AUTH_JWKS_URL=f"{url}/keys")
    before = fetched[0]
    assert verifier_for(settings).claims(token)["sub"] == "user-1"
    assert fetched[0] == before + 1  # from there, with no discovery at the issuer's address
