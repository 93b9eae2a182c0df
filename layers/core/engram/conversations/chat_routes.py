"""Chat turns (sync and ?async=true) and signed webhooks. Lives in the `chat` function."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from engram.api.http import Reply, deps_of, idempotency_key, ok, principal, request_clock, tenant_of
from engram.conversations import chat, webhooks
from engram.conversations.models import MessageIn
from engram.kernel.errors import BadRequest
from engram.kernel.ids import check_id
from engram.wiring.model import ModelDeps

router = Router()


def model_deps_of(router: Router) -> ModelDeps:
    """The chat function's dependencies: Stores and what calls a model."""
    deps = deps_of(router)
    if not isinstance(deps, ModelDeps):
        raise TypeError(f"the resolver's context carries {type(deps).__name__}, not the chat function's ModelDeps")
    return deps


@router.post("/api/agents/<agentId>/sessions/<sessionId>/messages")
def post_message(agentId: str, sessionId: str, body: MessageIn, async_: Annotated[bool, Query(alias="async")] = False) -> Reply:
    deps, tenant = model_deps_of(router), tenant_of(router)
    check_id("agentId", agentId), check_id("sessionId", sessionId)
    if async_:
        run = chat.enqueue_turn(
            deps,
            tenant=tenant,
            agent_id=agentId,
            session_id=sessionId,
            message=body.message,
            trigger="async",
            client_turn_id=_turn_key(body),
        )
        return ok({"runId": run.id, "sessionId": sessionId, "status": run.status}, 202)
    waited_s, remaining_s = request_clock(router)
    who = principal(router)
    outcome = chat.run_chat_turn(
        deps,
        tenant,
        agentId,
        sessionId,
        body.message,
        waited_s=waited_s,
        remaining_s=remaining_s,
        client_turn_id=_turn_key(body),
        person_name=who.name,
    )
    # A turn paused for its owner's approval (TL10): 202 with the run and the held calls.
    return ok(outcome.public(), 202 if outcome.run.status == "awaiting_approval" else 200)


def _turn_key(body: MessageIn) -> str | None:
    """The turn's idempotency key: the `Idempotency-Key` header or the body's `clientTurnId` (the
    same id if both are sent)."""
    header = idempotency_key(router)
    if header is not None and body.client_turn_id is not None and body.client_turn_id != header:
        raise BadRequest("Idempotency-Key and clientTurnId name different turns", field="clientTurnId")
    return header or body.client_turn_id


@router.post("/api/agents/<agentId>/webhook")
def post_webhook(agentId: str) -> Reply:
    event = router.current_event
    run = webhooks.accept(model_deps_of(router), agent_id=agentId, headers=event.headers or {}, raw_body=event.decoded_body or "")
    return ok({"runId": run.id, "sessionId": run.session_id, "status": run.status}, 202)
