"""Lambda SnapStart (template parameter SnapStart): what a function's snapshot may carry, and what
each environment restored from it must make afresh.

Lambda runs `before_snapshot` hooks once, when it publishes a version, and `after_restore` hooks in
every environment it resumes from that snapshot. So the snapshot takes the work every cold start
would otherwise repeat and that holds nothing per-environment: the request models' validators
(deferred at import, `kernel.model`) and the AWS service models, endpoint rules and client classes
botocore loads with a first client (built with placeholder credentials and then dropped, so no
credential, connection or pool is captured). A restored environment gets a fresh random seed (many
environments resume the same snapshot: botocore's and the anthropic SDK's retry jitter must not
march in step) and drops whatever its function built before the snapshot (dependencies, clients,
cached secrets), so they are made anew with this environment's credentials and connections.

The hooks come from `snapshot_restore_py`, which Lambda's managed Python runtimes include; where it
is missing (tests, the local stack) nothing is registered and nothing changes.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable, Iterator

from pydantic import BaseModel

from engram.aws.clients import client_config
from engram.kernel.observability import logger

# Every AWS service the functions call (a function that never calls one only loses the few
# milliseconds its model takes to load at publish time).
SERVICES = ("dynamodb", "s3", "sqs", "scheduler", "secretsmanager")


def register(reset: Callable[[], None], *, services: tuple[str, ...] = SERVICES) -> bool:
    """Registers the hooks; `reset` drops what the function built before the snapshot. False
    where the runtime has no SnapStart hooks."""
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot  # type: ignore[import-not-found]  # Lambda runtime only
    except ImportError:
        return False
    register_before_snapshot(prime, services)
    register_after_restore(restored, reset)
    return True


def prime(services: tuple[str, ...] = SERVICES) -> dict[str, int]:
    """Before the snapshot: build the deferred validators, warm botocore and the secret detector.
    Returns what it did."""
    return {"validators": build_validators(), "clients": warm_clients(services), "detector": warm_secret_detector()}


def warm_secret_detector() -> int:
    """The secret detector's rules (detect-secrets' plugins) and confusables table, which it loads on
    its first check (~0.2 s); the number of rules."""
    from engram.kernel.secrets import find_secret
    from engram.secrets.formats import library_rules

    find_secret("p\u0430ssword: warm-up")
    return len(library_rules())


def restored(reset: Callable[[], None]) -> None:
    """After a restore: a seed of this environment's own, and nothing built before the snapshot."""
    random.seed(os.urandom(32))
    reset()
    if "aws_lambda_powertools.utilities.parameters" in sys.modules:  # a cached secret is re-read
        sys.modules["aws_lambda_powertools.utilities.parameters"].clear_caches()
    logger.info("restored from a SnapStart snapshot")


def build_validators() -> int:
    """Builds every engram model whose validator is still deferred; returns how many."""
    built = 0
    for model in _subclasses(BaseModel):
        if model.__module__.startswith("engram.") and not model.__pydantic_complete__:
            try:
                built += bool(model.model_rebuild(force=True))
            except Exception:  # a model that cannot be built yet is built on first use, as without SnapStart
                logger.debug("could not build %s before the snapshot", model.__qualname__)
    return built


def warm_clients(services: tuple[str, ...]) -> int:
    """Creates one client per service the way `aws.clients` does, with placeholder credentials so
    the default session resolves and caches none, and drops it: botocore keeps the loaded models."""
    import boto3

    for service in services:
        boto3.client(  # the region from the environment, as `make_client` takes it
            service,
            aws_access_key_id="snapshot",
            aws_secret_access_key="snapshot",  # a placeholder: the client is never used
            config=client_config(),
        )
    return len(services)


def _subclasses[M](cls: type[M]) -> Iterator[type[M]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)
