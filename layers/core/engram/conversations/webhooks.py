"""Signed webhooks: `X-Engram-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">`.

The timestamp (`X-Engram-Timestamp`, unix seconds) is signed too and must be recent, so a
captured request cannot be replayed later. Unknown agents and bad signatures get the same 401,
so agent ids cannot be probed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from engram.conversations.chat import enqueue_turn, ensure_session
from engram.conversations.models import WebhookIn
from engram.kernel.errors import BadRequest, Unauthorized
from engram.kernel.ids import check_id
from engram.runs.models import Run
from engram.wiring.model import ModelDeps


def sign(secret: str, timestamp: str, raw_body: str) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.{raw_body}".encode(), hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _header(headers: Mapping[str, Any], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return str(value)
    return ""


def verify(deps: ModelDeps, agent_id: str, headers: Mapping[str, Any], raw_body: str) -> str:
    """Returns the agent's tenant when the signature is valid."""
    denied = Unauthorized("missing or invalid webhook signature", code="invalid_signature")
    timestamp, signature = _header(headers, "x-engram-timestamp"), _header(headers, "x-engram-signature")
    if not timestamp or not signature:
        raise denied
    try:
        age = abs(time.time() - int(timestamp))
    except ValueError:
        raise denied from None
    if age > deps.settings.webhook_tolerance_s:
        raise Unauthorized("the webhook timestamp is too old or in the future", code="stale_signature")
    tenant = deps.agents.tenant_of(agent_id)
    secret = deps.agents.webhook_secret(tenant, agent_id) if tenant else None
    expected = sign(secret or "no-secret", timestamp, raw_body)
    if not (secret and hmac.compare_digest(expected, signature)):
        raise denied
    return tenant  # type: ignore[return-value]


def accept(deps: ModelDeps, *, agent_id: str, headers: Mapping[str, Any], raw_body: str) -> Run:
    check_id("agentId", agent_id)
    tenant = verify(deps, agent_id, headers, raw_body)
    try:
        body = WebhookIn.model_validate(json.loads(raw_body or "null"))
    except json.JSONDecodeError:
        raise BadRequest("the request body is not valid JSON", field="body", code="invalid_body") from None
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequest(f"{field}: {first['msg']}", field=field, code="validation_error") from None
    ensure_session(deps, tenant, agent_id, body.session_id)
    return enqueue_turn(
        deps, tenant=tenant, agent_id=agent_id, session_id=body.session_id, message=body.message, trigger="webhook"
    )
