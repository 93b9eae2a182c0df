"""The single DynamoDB table: agents, workspaces, sessions, runs and usage rows of every tenant."""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from engram.aws.clients import make_client
from engram.kernel.errors import Conflict, NotFound, SessionBusy
from engram.agents.models import Agent, Workspace
from engram.cards.models import CardType
from engram.runs.models import Run
from engram.conversations.models import Session
from engram.usage.models import UsageRow
from engram.kernel.model import now_iso
from engram.aws import keys
from engram.aws.table import cancellation_codes, chunks, condition_failed, decode_token, deserialize, encode_token, serialize



class TableStore:
    def __init__(self, table_name: str, client: Any = None):
        self.name = table_name
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client("dynamodb")
        return self._client

    # --- primitives ---------------------------------------------------------------------------
    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        out = self.client.get_item(TableName=self.name, Key=serialize({"PK": pk, "SK": sk}), ConsistentRead=True)
        return deserialize(out["Item"]) if "Item" in out else None

    def _query(
        self,
        pk: str,
        *,
        sk_prefix: str | None = None,
        index: str | None = None,
        limit: int | None = None,
        token: str | None = None,
        newest_first: bool = False,
        projection: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        pk_attr = f"{index}PK" if index else "PK"
        sk_attr = f"{index}SK" if index else "SK"
        expr = "#pk = :pk"
        names = {"#pk": pk_attr}
        values: dict[str, Any] = {":pk": pk}
        if sk_prefix:
            expr += " AND begins_with(#sk, :sk)"
            names["#sk"] = sk_attr
            values[":sk"] = sk_prefix
        args: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": expr,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": serialize(values),
            "ScanIndexForward": not newest_first,
        }
        if index:
            args["IndexName"] = index
        if limit:
            args["Limit"] = limit
        if projection:
            args["ProjectionExpression"] = projection
        start = decode_token(token, partition_attr=pk_attr, partition_value=pk)
        if start:
            args["ExclusiveStartKey"] = start
        out = self.client.query(**args)
        return [deserialize(i) for i in out.get("Items", [])], encode_token(out.get("LastEvaluatedKey"))

    def _query_all(self, pk: str, **kw: Any) -> list[dict[str, Any]]:
        items, token = self._query(pk, **kw)
        while token:
            more, token = self._query(pk, token=token, **kw)
            items.extend(more)
        return items

    def _delete_keys(self, key_pairs: list[tuple[str, str]]) -> None:
        for batch in chunks(key_pairs, 25):
            request = {self.name: [{"DeleteRequest": {"Key": serialize({"PK": pk, "SK": sk})}} for pk, sk in batch]}
            for attempt in range(8):
                out = self.client.batch_write_item(RequestItems=request)
                request = out.get("UnprocessedItems") or {}
                if not request:
                    break
                time.sleep(min(0.05 * 2**attempt, 1.0))

    def _update(self, pk: str, sk: str, changes: dict[str, Any], *, what: str, field: str) -> dict[str, Any]:
        sets, removes, names, values = [], [], {}, {}
        for i, (attr, value) in enumerate(changes.items()):
            names[f"#a{i}"] = attr
            if value is None:
                removes.append(f"#a{i}")
            else:
                sets.append(f"#a{i} = :v{i}")
                values[f":v{i}"] = value
        expr = ("SET " + ", ".join(sets) if sets else "") + (" REMOVE " + ", ".join(removes) if removes else "")
        args: dict[str, Any] = {
            "TableName": self.name,
            "Key": serialize({"PK": pk, "SK": sk}),
            "UpdateExpression": expr.strip(),
            "ConditionExpression": "attribute_exists(PK)",
            "ExpressionAttributeNames": names,
            "ReturnValues": "ALL_NEW",
        }
        if values:
            args["ExpressionAttributeValues"] = serialize(values)
        try:
            out = self.client.update_item(**args)
        except ClientError as err:
            if condition_failed(err):
                raise NotFound(f"{what} not found", field=field) from None
            raise
        return deserialize(out["Attributes"])

    # --- workspaces ---------------------------------------------------------------------------
    def put_workspace(self, t: str, ws: Workspace) -> None:
        item = {"PK": keys.tenant_pk(t), "SK": keys.workspace_sk(ws.id), **ws.model_dump(by_alias=True)}
        self.client.put_item(TableName=self.name, Item=serialize(item), ConditionExpression="attribute_not_exists(PK)")

    def get_workspace(self, t: str, workspace_id: str) -> Workspace | None:
        item = self._get(keys.tenant_pk(t), keys.workspace_sk(workspace_id))
        return Workspace.model_validate(item) if item else None

    def list_workspaces(self, t: str, *, limit: int, token: str | None) -> tuple[list[Workspace], str | None]:
        items, nxt = self._query(keys.tenant_pk(t), sk_prefix="WS#", limit=limit, token=token)
        return [Workspace.model_validate(i) for i in items], nxt

    def update_workspace(self, t: str, workspace_id: str, changes: dict[str, Any]) -> Workspace:
        item = self._update(keys.tenant_pk(t), keys.workspace_sk(workspace_id), changes, what="workspace", field="workspaceId")
        return Workspace.model_validate(item)

    def delete_workspace(self, t: str, workspace_id: str) -> None:
        try:
            self.client.delete_item(
                TableName=self.name,
                Key=serialize({"PK": keys.tenant_pk(t), "SK": keys.workspace_sk(workspace_id)}),
                ConditionExpression="attribute_exists(PK)",
            )
        except ClientError as err:
            if condition_failed(err):
                raise NotFound("workspace not found", field="workspaceId") from None
            raise

    # --- agents -------------------------------------------------------------------------------
    def _agent_item(self, t: str, agent: Agent) -> dict[str, Any]:
        return {
            "PK": keys.tenant_pk(t),
            "SK": keys.agent_sk(agent.id),
            "GSI2PK": keys.agent_lookup(agent.id),
            "GSI2SK": t,
            "tenant": t,
            **agent.model_dump(by_alias=True),
        }

    def create_agent(self, t: str, agent: Agent, *, webhook_secret: str, dashboard: Session) -> None:
        """Agent, its `dashboard` session and the workspace check commit together or not at all."""
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.name,
                    "Item": serialize({**self._agent_item(t, agent), "webhookSecret": webhook_secret}),
                    "ConditionExpression": "attribute_not_exists(PK)",
                }
            },
            {"Put": {"TableName": self.name, "Item": serialize(self._session_item(t, dashboard))}},
        ]
        if agent.workspace_id:
            items.append(self._workspace_check(t, agent.workspace_id))
        self._transact(items, reasons={2: NotFound("workspace not found", field="workspaceId")})

    def _workspace_check(self, t: str, workspace_id: str) -> dict[str, Any]:
        return {
            "ConditionCheck": {
                "TableName": self.name,
                "Key": serialize({"PK": keys.tenant_pk(t), "SK": keys.workspace_sk(workspace_id)}),
                "ConditionExpression": "attribute_exists(PK)",
            }
        }

    def _transact(self, items: list[dict[str, Any]], *, reasons: dict[int, Exception]) -> None:
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as err:
            codes = cancellation_codes(err)
            for index, exc in reasons.items():
                if index < len(codes) and codes[index] == "ConditionalCheckFailed":
                    raise exc from None
            raise

    def get_agent(self, t: str, agent_id: str) -> Agent | None:
        item = self._get(keys.tenant_pk(t), keys.agent_sk(agent_id))
        return Agent.model_validate(item) if item else None

    def get_agent_secret(self, t: str, agent_id: str) -> str | None:
        item = self._get(keys.tenant_pk(t), keys.agent_sk(agent_id))
        return item.get("webhookSecret") if item else None

    def tenant_of_agent(self, agent_id: str) -> str | None:
        items, _ = self._query(keys.agent_lookup(agent_id), index="GSI2", limit=1)
        return items[0]["GSI2SK"] if items else None

    def list_agents(self, t: str, *, limit: int, token: str | None) -> tuple[list[Agent], str | None]:
        items, nxt = self._query(keys.tenant_pk(t), sk_prefix="AGENT#", limit=limit, token=token)
        return [Agent.model_validate(i) for i in items], nxt

    def agents_in_workspace(self, t: str, workspace_id: str) -> list[str]:
        items = self._query_all(keys.tenant_pk(t), sk_prefix="AGENT#", projection="id, workspaceId")
        return [i["id"] for i in items if i.get("workspaceId") == workspace_id]

    def update_agent(self, t: str, agent_id: str, changes: dict[str, Any]) -> Agent:
        if changes.get("workspaceId"):
            # The workspace must exist at the moment the agent moves into it.
            names = {f"#a{i}": k for i, k in enumerate(changes)}
            sets = [f"#a{i} = :v{i}" for i, (k, v) in enumerate(changes.items()) if v is not None]
            removes = [f"#a{i}" for i, (k, v) in enumerate(changes.items()) if v is None]
            values = {f":v{i}": v for i, (k, v) in enumerate(changes.items()) if v is not None}
            expr = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
            self._transact(
                [
                    {
                        "Update": {
                            "TableName": self.name,
                            "Key": serialize({"PK": keys.tenant_pk(t), "SK": keys.agent_sk(agent_id)}),
                            "UpdateExpression": expr,
                            "ConditionExpression": "attribute_exists(PK)",
                            "ExpressionAttributeNames": names,
                            "ExpressionAttributeValues": serialize(values),
                        }
                    },
                    self._workspace_check(t, changes["workspaceId"]),
                ],
                reasons={
                    0: NotFound("agent not found", field="agentId"),
                    1: NotFound("workspace not found", field="workspaceId"),
                },
            )
            agent = self.get_agent(t, agent_id)
            assert agent is not None
            return agent
        item = self._update(keys.tenant_pk(t), keys.agent_sk(agent_id), changes, what="agent", field="agentId")
        return Agent.model_validate(item)

    def delete_agent_cascade(self, t: str, agent_id: str) -> list[str]:
        """Deletes the agent's runs, sessions and (last) the agent row; returns the session ids.

        Children go first so that a retry after a partial failure finishes the job.
        """
        runs = self._query_all(keys.runs_by_agent(t, agent_id), index="GSI1", projection="PK, SK")
        children = self._query_all(keys.agent_pk(t, agent_id), projection="PK, SK")
        session_ids = [c["SK"].split("#", 1)[1] for c in children if c["SK"].startswith("SESSION#")]
        self._delete_keys([(r["PK"], r["SK"]) for r in runs] + [(c["PK"], c["SK"]) for c in children])
        self.client.delete_item(TableName=self.name, Key=serialize({"PK": keys.tenant_pk(t), "SK": keys.agent_sk(agent_id)}))
        return session_ids

    # --- sessions -----------------------------------------------------------------------------
    def _session_item(self, t: str, session: Session) -> dict[str, Any]:
        return {"PK": keys.agent_pk(t, session.agent_id), "SK": keys.session_sk(session.id), **session.model_dump(by_alias=True)}

    def create_session(self, t: str, session: Session, *, if_absent_ok: bool = False) -> bool:
        """Creates a session of an existing agent; False when it already existed and if_absent_ok."""
        try:
            self._transact(
                [
                    {
                        "Put": {
                            "TableName": self.name,
                            "Item": serialize(self._session_item(t, session)),
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": self.name,
                            "Key": serialize({"PK": keys.tenant_pk(t), "SK": keys.agent_sk(session.agent_id)}),
                            "ConditionExpression": "attribute_exists(PK)",
                        }
                    },
                ],
                reasons={
                    1: NotFound("agent not found", field="agentId"),
                    0: Conflict(f"session {session.id} already exists", field="id", code="session_exists"),
                },
            )
        except Conflict:
            if if_absent_ok:
                return False
            raise
        return True

    def get_session(self, t: str, agent_id: str, session_id: str) -> dict[str, Any] | None:
        return self._get(keys.agent_pk(t, agent_id), keys.session_sk(session_id))

    def list_sessions(self, t: str, agent_id: str, *, limit: int, token: str | None) -> tuple[list[Session], str | None]:
        items, nxt = self._query(keys.agent_pk(t, agent_id), sk_prefix="SESSION#", limit=limit, token=token)
        return [Session.model_validate(i) for i in items], nxt

    def delete_session(self, t: str, agent_id: str, session_id: str) -> None:
        """Refused while a turn holds the session, so a running turn cannot resurrect it."""
        try:
            self.client.delete_item(
                TableName=self.name,
                Key=serialize({"PK": keys.agent_pk(t, agent_id), "SK": keys.session_sk(session_id)}),
                ConditionExpression="attribute_exists(PK) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)",
                ExpressionAttributeValues=serialize({":now": int(time.time())}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if condition_failed(err):
                if err.response.get("Item"):
                    raise SessionBusy("a turn is running on this session; try again when it ends", field="sessionId") from None
                raise NotFound("session not found", field="sessionId") from None
            raise

    def acquire_lease(self, t: str, agent_id: str, session_id: str, run_id: str, ttl_s: float) -> dict[str, Any]:
        """Takes the session for one turn: turns of a session are serialised by this lease."""
        now = int(time.time())
        try:
            out = self.client.update_item(
                TableName=self.name,
                Key=serialize({"PK": keys.agent_pk(t, agent_id), "SK": keys.session_sk(session_id)}),
                UpdateExpression="SET leaseOwner = :run, leaseUntil = :until",
                ConditionExpression="attribute_exists(PK) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)",
                ExpressionAttributeValues=serialize({":run": run_id, ":until": now + int(ttl_s) + 1, ":now": now}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if condition_failed(err):
                if err.response.get("Item"):
                    raise SessionBusy("another turn is running on this session", field="sessionId") from None
                raise NotFound("session not found", field="sessionId") from None
            raise
        return deserialize(out["Attributes"])

    def release_lease(self, t: str, agent_id: str, session_id: str, run_id: str) -> None:
        try:
            self.client.update_item(
                TableName=self.name,
                Key=serialize({"PK": keys.agent_pk(t, agent_id), "SK": keys.session_sk(session_id)}),
                UpdateExpression="REMOVE leaseOwner, leaseUntil",
                ConditionExpression="leaseOwner = :run",
                ExpressionAttributeValues=serialize({":run": run_id}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

    # --- runs and usage -----------------------------------------------------------------------
    def _run_item(self, t: str, run: Run) -> dict[str, Any]:
        item = {
            "PK": keys.tenant_pk(t),
            "SK": keys.run_sk(run.id),
            "GSI1PK": keys.runs_by_agent(t, run.agent_id),
            "GSI1SK": run.id,
            **run.model_dump(by_alias=True, mode="json", exclude={"latest_conviction", "resolution_status"}),
        }
        # Set by their own updates (re-examinations finishing, PATCH): a run's rewrite keeps them.
        for attr, value in (("latestConviction", run.latest_conviction), ("resolutionStatus", run.resolution_status)):
            if value is not None:
                item[attr] = value
        if run.kind == "reexamination" and run.parent_run_id:
            # Sparse: GET /api/runs/{parent}/re-examinations is one Query, in creation order.
            item["GSI2PK"] = keys.reexaminations_of(t, run.parent_run_id)
            item["GSI2SK"] = f"{run.created_at}#{run.id}"
        return item

    def create_run(self, t: str, run: Run) -> bool:
        """Records a queued run; False if a run with this id already exists (a redelivered firing)."""
        try:
            self.client.put_item(TableName=self.name, Item=serialize(self._run_item(t, run)), ConditionExpression="attribute_not_exists(PK)")
        except ClientError as err:
            if condition_failed(err):
                return False
            raise
        return True

    def start_run(self, t: str, run_id: str, *, claim_s: float) -> Run | None:
        """Claims a queued run for one worker (status running, a claim that expires after `claim_s`,
        so a crashed worker's run can be taken again). None: finished, or another worker has it."""
        now = int(time.time())
        try:
            out = self.client.update_item(
                TableName=self.name,
                Key=serialize({"PK": keys.tenant_pk(t), "SK": keys.run_sk(run_id)}),
                UpdateExpression="SET #s = :running, claimedUntil = :until, updatedAt = :at",
                ConditionExpression="attribute_exists(PK) AND (#s = :queued OR (#s = :running AND claimedUntil < :now))",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=serialize(
                    {":running": "running", ":queued": "queued", ":until": now + int(claim_s) + 1, ":now": now, ":at": now_iso()}
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as err:
            if condition_failed(err):
                return None
            raise
        return Run.model_validate(deserialize(out["Attributes"]))

    def requeue_run(self, t: str, run_id: str) -> None:
        """Gives a claimed run back (its session was busy): the retry claims it again."""
        try:
            self.client.update_item(
                TableName=self.name,
                Key=serialize({"PK": keys.tenant_pk(t), "SK": keys.run_sk(run_id)}),
                UpdateExpression="SET #s = :queued REMOVE claimedUntil",
                ConditionExpression="#s = :running",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=serialize({":queued": "queued", ":running": "running"}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

    def set_resolution(self, t: str, run_id: str, status: str) -> Run:
        item = self._update(keys.tenant_pk(t), keys.run_sk(run_id), {"resolutionStatus": status, "updatedAt": now_iso()},
                            what="run", field="runId")
        return Run.model_validate(item)

    def set_latest_conviction(self, t: str, parent_run_id: str, *, score: int, child_run_id: str, child_created_at: str) -> None:
        """The parent run shows its newest re-examination's conviction; its result never changes.
        An older re-examination finishing late does not overwrite a newer one."""
        try:
            self.client.update_item(
                TableName=self.name,
                Key=serialize({"PK": keys.tenant_pk(t), "SK": keys.run_sk(parent_run_id)}),
                UpdateExpression="SET latestConviction = :score, latestReexaminationId = :child, latestConvictionAt = :at",
                ConditionExpression="attribute_exists(PK) AND (attribute_not_exists(latestConvictionAt) OR latestConvictionAt <= :at)",
                ExpressionAttributeValues=serialize({":score": score, ":child": child_run_id, ":at": f"{child_created_at}#{child_run_id}"}),
            )
        except ClientError as err:
            if not condition_failed(err):
                raise

    def list_reexaminations(self, t: str, parent_run_id: str, *, limit: int, token: str | None) -> tuple[list[Run], str | None]:
        items, nxt = self._query(keys.reexaminations_of(t, parent_run_id), index="GSI2", limit=limit, token=token)
        return [Run.model_validate(i) for i in items], nxt

    def reset_session_context(self, t: str, agent_id: str, session_id: str, token: str) -> dict[str, Any]:
        """Active Memory reset (AM2), under the session lease `token` holds: the context starts after
        the messages the session holds now (they stay in the transcript), the counter restarts."""
        try:
            out = self.client.update_item(
                TableName=self.name,
                Key=serialize({"PK": keys.agent_pk(t, agent_id), "SK": keys.session_sk(session_id)}),
                UpdateExpression=(
                    "SET contextFrom = if_not_exists(messageCount, :zero), revisionAtReset = if_not_exists(revision, :zero), "
                    "runsSinceReset = :zero, lastResetAt = :now REMOVE leaseOwner, leaseUntil"
                ),
                ConditionExpression="leaseOwner = :token",
                ExpressionAttributeValues=serialize({":zero": 0, ":now": now_iso(), ":token": token}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as err:
            if condition_failed(err):
                raise SessionBusy("the session lease was lost during the reset; retry", field="sessionId") from None
            raise
        return deserialize(out["Attributes"])

    def _usage_item(self, t: str, row: UsageRow) -> dict[str, Any]:
        return {
            "PK": keys.usage_pk(t),
            "SK": f"{row.created_at}#{row.id}",
            "GSI1PK": keys.usage_by_agent(t, row.agent_id),
            "GSI1SK": f"{row.session_key}#{row.created_at}#{row.id}",
            **row.model_dump(by_alias=True),
        }

    def put_run(self, t: str, run: Run, *, only_if_new: bool = False) -> None:
        extra = {"ConditionExpression": "attribute_not_exists(PK)"} if only_if_new else {}
        try:
            self.client.put_item(TableName=self.name, Item=serialize(self._run_item(t, run)), **extra)
        except ClientError as err:
            if not (only_if_new and condition_failed(err)):
                raise

    def get_run(self, t: str, run_id: str) -> Run | None:
        item = self._get(keys.tenant_pk(t), keys.run_sk(run_id))
        return Run.model_validate(item) if item else None

    def list_runs(self, t: str, agent_id: str, *, limit: int, token: str | None) -> tuple[list[Run], str | None]:
        items, nxt = self._query(keys.runs_by_agent(t, agent_id), index="GSI1", limit=limit, token=token, newest_first=True)
        return [Run.model_validate(i) for i in items], nxt

    def finish_turn(
        self,
        t: str,
        *,
        run: Run,
        usage_rows: list[UsageRow],
        session_changes: dict[str, Any] | None,
        extra_items: list[dict[str, Any]] | None = None,
    ) -> None:
        """Ends a turn in one transaction: the run record, its usage, and the session's lease.

        `session_changes` (successful turns) bumps the revision and counters in the same write;
        a run can only be finished once (a redelivered job cannot double-count).
        `extra_items` (plain attribute dicts with their keys, e.g. the turn's archived messages)
        are Puts of the same transaction, up to 90 items in all (DynamoDB allows
        100); any overflow is written after the transaction commits, with BatchWriteItem.
        """
        items: list[dict[str, Any]] = []
        reasons: dict[int, Exception] = {}
        if run.session_id is not None:
            session_key = {"PK": keys.agent_pk(t, run.agent_id), "SK": keys.session_sk(run.session_id)}
            sets = ["updatedAt = :now"] if session_changes else []
            values: dict[str, Any] = {":run": run.id}
            if session_changes:
                values[":now"] = run.updated_at
                for i, (attr, value) in enumerate(session_changes.items()):
                    sets.append(f"{attr} = :s{i}")
                    values[f":s{i}"] = value
            update = {
                "TableName": self.name,
                "Key": serialize(session_key),
                "UpdateExpression": ("SET " + ", ".join(sets) + " " if sets else "") + "REMOVE leaseOwner, leaseUntil",
                "ConditionExpression": "leaseOwner = :run",
                "ExpressionAttributeValues": serialize(values),
            }
            reasons[len(items)] = SessionBusy("the session lease was lost before the turn finished", field="sessionId")
            items.append({"Update": update})
        # A clean-slate run (no session) has no lease: the run record's own status guards it.
        reasons[len(items)] = Conflict("this run has already finished", field="runId", code="run_finished")
        items.append(
            {
                "Put": {
                    "TableName": self.name,
                    "Item": serialize(self._run_item(t, run)),
                    "ConditionExpression": "attribute_not_exists(PK) OR #s IN (:queued, :running)",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": serialize({":queued": "queued", ":running": "running"}),
                }
            }
        )
        items += [{"Put": {"TableName": self.name, "Item": serialize(self._usage_item(t, row))}} for row in usage_rows]
        extra = list(extra_items or [])
        room = max(0, 90 - len(items))  # TransactWriteItems takes at most 100 items
        items += [{"Put": {"TableName": self.name, "Item": serialize(item)}} for item in extra[:room]]
        self._transact(items, reasons=reasons)
        overflow = extra[room:]
        if overflow:
            # Only a turn with very many long messages gets here; the turn itself is committed, so
            # these are written best-effort with BatchWriteItem (retrying unprocessed items).
            try:
                for batch in chunks(overflow, 25):
                    request = {self.name: [{"PutRequest": {"Item": serialize(item)}} for item in batch]}
                    for attempt in range(8):
                        request = self.client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
                        if not request:
                            break
                        time.sleep(min(0.05 * 2**attempt, 1.0))
            except Exception:
                from engram.kernel.observability import logger

                logger.exception("could not write the items that overflowed the turn transaction", extra={"run_id": run.id, "count": len(overflow)})

    def recent_runs_with_cards(self, t: str, agent_id: str, *, limit: int, page: int = 25, max_pages: int = 4) -> list[Run]:
        """The agent's newest runs whose result holds a card: its runs through GSI1 newest first,
        a bounded number of small pages (at most `page * max_pages` runs are read)."""
        found: list[Run] = []
        token = None
        for _ in range(max_pages):
            items, token = self._query(keys.runs_by_agent(t, agent_id), index="GSI1", limit=page, token=token, newest_first=True)
            for item in items:
                result = item.get("result")
                if item.get("status") == "succeeded" and isinstance(result, dict) and isinstance(result.get("card"), dict):
                    found.append(Run.model_validate(item))
                    if len(found) >= limit:
                        return found
            if not token:
                break
        return found

    # --- card types ---------------------------------------------------------------------------
    def put_card_type(self, t: str, card_type: CardType) -> None:
        item = {"PK": keys.tenant_pk(t), "SK": keys.card_type_sk(card_type.name), **card_type.model_dump(by_alias=True, mode="json")}
        self.client.put_item(TableName=self.name, Item=serialize(item))

    def get_card_type(self, t: str, name: str) -> CardType | None:
        item = self._get(keys.tenant_pk(t), keys.card_type_sk(name))
        return CardType.model_validate(item) if item else None

    def list_card_types(self, t: str, *, limit: int, token: str | None) -> tuple[list[CardType], str | None]:
        items, nxt = self._query(keys.tenant_pk(t), sk_prefix="CARDTYPE#", limit=limit, token=token)
        return [CardType.model_validate(i) for i in items], nxt

    def list_usage(
        self, t: str, *, agent_id: str | None, session_key: str | None, limit: int, token: str | None
    ) -> tuple[list[UsageRow], str | None]:
        if agent_id:
            items, nxt = self._query(
                keys.usage_by_agent(t, agent_id),
                index="GSI1",
                sk_prefix=f"{session_key}#" if session_key else None,
                limit=limit,
                token=token,
                newest_first=not session_key,
            )
        else:
            items, nxt = self._query(keys.usage_pk(t), limit=limit, token=token, newest_first=True)
        return [UsageRow.model_validate(i) for i in items], nxt
