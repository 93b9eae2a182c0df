"""`make bench` (the authorizer): what the HTTP API's Lambda authorizer costs.

1. Cold start: `functions/authorizer/app.py` imported in a fresh interpreter (source layer,
   bytecode cached), median of N; and what the first sign-in JWT adds (PyJWT and cryptography,
   imported with it, never for keys).
2. Warm, per uncached request, in process on moto (loopback DynamoDB, so a GetItem here is the
   code's cost plus a local round trip, not DynamoDB's ~3-5 ms): an API key whose last use was
   noted within the minute (one GetItem), one whose last use is noted (GetItem + UpdateItem), a
   JWT with the issuer's keys cached (RS256 verification, no I/O).
3. Cached: API Gateway answers from its cache for 60 s per Authorization header without invoking
   the function at all; the local emulation's cache hit is timed for completeness.

    python -m bench.authorizer [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.memory_sections import ROOT  # its import puts the core on sys.path and sets a local AWS environment

_PROBE = """
import importlib.util, sys, time
sys.path[:0] = [{layer!r}]
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", {app!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
init = time.perf_counter() - start
start = time.perf_counter()
import jwt, jwt.algorithms  # what the first JWT imports
first_jwt = time.perf_counter() - start
print(init, first_jwt)
"""


def cold(repeats: int) -> tuple[float, float]:
    code = _PROBE.format(layer=str(ROOT / "layers" / "core"), app=str(ROOT / "functions" / "authorizer" / "app.py"))
    inits, jwts = [], []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={
                "PATH": "/usr/bin:/bin",
                "AWS_DEFAULT_REGION": "us-east-1",
                # the template's Globals as deployed by default (no X-Ray SDK unless TraceAwsCalls)
                "PYDANTIC_DISABLE_PLUGINS": "__all__",
                "POWERTOOLS_TRACE_DISABLED": "true",
            },
        )
        init, first_jwt = (float(x) for x in out.stdout.split())
        inits.append(init)
        jwts.append(first_jwt)
    return statistics.median(inits) * 1000, statistics.median(jwts) * 1000


def _median_ms(fn: Any, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def warm(n: int) -> dict[str, float]:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa
    from moto import mock_aws

    from engram.apikeys import authorizer
    from engram.apikeys.models import ApiKey, KeyGrant, key_hash, new_key
    from engram.apikeys.repository import ApiKeyRepository
    from engram.aws.table import Table
    from engram.kernel.settings import get_settings
    from local.apigw import Functions
    from local.resources import create_resources
    from local.template import load_template

    out: dict[str, float] = {}
    template = load_template(ROOT / "template.yaml")
    with mock_aws():
        resources = create_resources(template)
        table = Table(resources.env()["TABLE_NAME"])
        keys = ApiKeyRepository(table)
        secret = new_key()
        keys.create(
            "t" * 64,
            ApiKey(id="key_1", created_at="t", updated_at="t", name="bench", scopes=["read", "write"], hint=secret[:8]),
            KeyGrant(sub="alice", key_id="key_1", scopes=("read", "write")),
            key_hash(secret),
            limit=10,
        )
        deps: Any = type("Deps", (), {"settings": get_settings(), "api_keys": keys})()
        event = {"headers": {"authorization": f"Bearer {secret}"}}
        authorizer.authorize(deps, event)  # the client, and the last use noted
        out["key (one BatchGetItem: the key and the throttle count)"] = _median_ms(lambda: authorizer.authorize(deps, event), n)
        clock = [time.time()]
        real_time = authorizer.time
        authorizer.time = type("T", (), {"time": staticmethod(lambda: clock[0])})  # type: ignore[assignment]
        try:

            def noted() -> None:
                clock[0] += 61  # every call a minute later: the last use is written each time
                authorizer.authorize(deps, event)

            out["key, last use noted (BatchGetItem + UpdateItem)"] = _median_ms(noted, n)
        finally:
            authorizer.time = real_time  # type: ignore[assignment]

        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        verifier = authorizer.JwtVerifier("https://issuer.example.com", ["client"])
        signing = type("K", (), {"key": private.public_key()})()
        verifier._client = type("C", (), {"get_signing_key_from_jwt": staticmethod(lambda token: signing)})()  # type: ignore[assignment]
        now = int(time.time())
        claims = {"sub": "u", "iss": "https://issuer.example.com", "client_id": "client", "iat": now, "exp": now + 3600}
        token = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k"})
        jwt_event = {"headers": {"authorization": f"Bearer {token}"}}
        out["JWT, JWKS cached (RS256; + GetItem of the throttle count)"] = _median_ms(
            lambda: authorizer.authorize(deps, jwt_event, verifier), n
        )

        functions = Functions(template=template, root=ROOT, by_id={})
        functions._auth_cache["Bearer x"] = (time.monotonic() + 60, {"sub": "alice"})
        out["emulated gateway cache hit"] = _median_ms(lambda: functions.lambda_authorizer({}, "Bearer x"), n)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    init, first_jwt = cold(args.repeats)
    print(f"authorizer cold start: import {init:.0f} ms (median of {args.repeats}); the first JWT adds {first_jwt:.0f} ms")
    for name, ms in warm(args.calls).items():
        print(f"authorizer warm, {name}: {ms:.3f} ms (median of {args.calls})")


if __name__ == "__main__":
    main()
