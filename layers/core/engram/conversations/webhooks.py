"""Signed webhooks: `X-Engram-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">`.

The timestamp (`X-Engram-Timestamp`, unix seconds) is signed too and must be recent (at most
WEBHOOK_TOLERANCE_SECONDS old, at most WEBHOOK_FUTURE_SKEW_SECONDS ahead), and each signed request
is accepted once: its signature is recorded with one conditional write that expires with the
window, so a captured request replayed inside the window is a 409 `duplicate_delivery`. The mark is
taken once the body is valid and released when the turn could not be queued (503, 409 quota, 404),
so only a queued delivery counts as delivered.
Unknown agents and bad signatures get the same 401 after the same work (one lookup, one HMAC),
so agent ids cannot be probed, not even by timing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping

from pydantic import ValidationError

from engram.conversations.chat import enqueue_turn, ensure_session
from engram.conversations.models import WebhookIn
from engram.kernel.errors import BadRequest, Conflict, Unauthorized, invalid_input, not_json
from engram.kernel.ids import check_id
from engram.kernel.observability import logger
from engram.runs.models import Run
from engram.wiring.model import ModelDeps

_NO_SECRET = "-" * 43  # stands in for an unknown agent's secret, so its path does the same work
_TIMESTAMP_DIGITS = 12  # unix seconds until the year 33658
_RELEASE_TRIES = 2


def sign(secret: str, timestamp: str, raw_body: str) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.{raw_body}".encode(), hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _header(headers: Mapping[str, object], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return str(value)
    return ""


def verify(deps: ModelDeps, agent_id: str, headers: Mapping[str, object], raw_body: str) -> tuple[str, _Delivery]:
    """The agent's tenant and the request's delivery mark (not taken yet) when the signature is valid."""
    denied = Unauthorized("missing or invalid webhook signature", code="invalid_signature")
    timestamp, signature = _header(headers, "x-engram-timestamp"), _header(headers, "x-engram-signature")
    if not timestamp or not signature or not timestamp.isdigit():
        raise denied
    if len(timestamp) > _TIMESTAMP_DIGITS or not timestamp.isascii():  # before any arithmetic on it
        raise BadRequest(
            f"X-Engram-Timestamp is unix seconds: at most {_TIMESTAMP_DIGITS} ASCII digits",
            field="X-Engram-Timestamp",
            code="invalid_timestamp",
        )
    now = time.time()
    settings = deps.settings
    if not -settings.webhook_future_skew_s <= now - int(timestamp) <= settings.webhook_tolerance_s:
        raise Unauthorized("the webhook timestamp is too old or in the future", code="stale_signature")
    credentials = deps.agents.webhook_credentials(agent_id)
    tenant, secret, previous, previous_until = credentials or ("", _NO_SECRET, "", 0)
    # Two HMACs on every path (the current secret, and the replaced one during its grace period or
    # a stand-in): an unknown agent, a bad signature and a rotation cost the same.
    candidates = [secret, previous if previous and now < previous_until else _NO_SECRET]
    matched = ""
    for candidate in candidates:
        expected = sign(candidate, timestamp, raw_body)
        if hmac.compare_digest(expected, signature) and candidate != _NO_SECRET:
            matched = expected
    if not (matched and credentials):
        raise denied
    return tenant, _Delivery(
        tenant, agent_id, matched.removeprefix("sha256="), int(timestamp) + settings.webhook_tolerance_s + 60
    )


class _Delivery:
    """The mark of one signed request: taken before its turn is queued (so two copies of it
    cannot both queue one), released again when queueing fails, so the sender's retry of a
    refused delivery is a new attempt rather than a 409."""

    def __init__(self, tenant: str, agent_id: str, digest: str, expires_at: int):
        self.tenant, self.agent_id, self.digest, self.expires_at = tenant, agent_id, digest, expires_at

    def mark(self, deps: ModelDeps) -> None:
        if not deps.agents.first_delivery(self.tenant, self.agent_id, self.digest, expires_at=self.expires_at):
            raise Conflict("this signed request was delivered already; sign each delivery anew", code="duplicate_delivery")

    def release(self, deps: ModelDeps) -> None:
        """Forgets the mark (tried twice: a release lost to the same outage that refused the
        delivery would leave the sender's retries refused until the window closes)."""
        for attempt in range(_RELEASE_TRIES):
            try:
                deps.agents.forget_delivery(self.tenant, self.agent_id, self.digest)
                return
            except Exception:
                logger.warning("could not release a refused webhook delivery", extra={"attempt": attempt + 1}, exc_info=True)


def accept(deps: ModelDeps, *, agent_id: str, headers: Mapping[str, object], raw_body: str) -> Run:
    check_id("agentId", agent_id)
    tenant, delivery = verify(deps, agent_id, headers, raw_body)
    try:
        body = WebhookIn.model_validate(json.loads(raw_body or "null"))
    except json.JSONDecodeError:
        raise not_json() from None
    except ValidationError as err:
        raise invalid_input(err.errors()) from None
    delivery.mark(deps)
    try:
        ensure_session(deps, tenant, agent_id, body.session_id)
        return enqueue_turn(
            deps, tenant=tenant, agent_id=agent_id, session_id=body.session_id, message=body.message, trigger="webhook"
        )
    except Exception:
        # Not queued (a full quota, a deleted agent, the queue or the table down): the same signed
        # request may come again.
        delivery.release(deps)
        raise
