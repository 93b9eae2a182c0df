"""`authorizer` function: the HTTP API's Lambda authorizer (Engram API keys and sign-in JWTs)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from engram.apikeys.authorizer import authorize
from engram.roots import authorizer
from engram.roots.function import FunctionRoot

ROOT = FunctionRoot(authorizer.build)


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return authorize(ROOT.deps, event)
