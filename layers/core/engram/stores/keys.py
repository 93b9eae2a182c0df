"""Every key shape of the single table and the bucket, in one place.

Every partition key starts with the tenant, so a query built from one principal's tenant can
never reach another's rows. The one exception is the GSI2 lookup a webhook needs (it arrives
without a principal): it maps an agent id to its tenant and is only used after the HMAC check.
Ids are validated here, before they can reach a key or an S3 path.
"""

from __future__ import annotations

from ..ids import check_id


def tenant_pk(t: str) -> str:
    return t


def workspace_sk(workspace_id: str) -> str:
    return f"WS#{check_id('workspaceId', workspace_id)}"


def agent_sk(agent_id: str) -> str:
    return f"AGENT#{check_id('agentId', agent_id)}"


def agent_lookup(agent_id: str) -> str:
    return f"AGENTID#{check_id('agentId', agent_id)}"


def agent_pk(t: str, agent_id: str) -> str:
    """The partition holding an agent's sessions (and later its memories)."""
    return f"{t}#A#{check_id('agentId', agent_id)}"


def session_sk(session_id: str) -> str:
    return f"SESSION#{check_id('sessionId', session_id)}"


def run_sk(run_id: str) -> str:
    return f"RUN#{check_id('runId', run_id)}"


def runs_by_agent(t: str, agent_id: str) -> str:
    return f"{t}#A#{check_id('agentId', agent_id)}#RUNS"


def usage_pk(t: str) -> str:
    return f"{t}#USAGE"


def usage_by_agent(t: str, agent_id: str) -> str:
    return f"{t}#USAGE#A#{check_id('agentId', agent_id)}"


def session_object(t: str, agent_id: str, session_id: str) -> str:
    return f"{session_prefix(t, agent_id)}{check_id('sessionId', session_id)}.json"


def session_prefix(t: str, agent_id: str) -> str:
    return f"state/sessions/{t}/{check_id('agentId', agent_id)}/"
