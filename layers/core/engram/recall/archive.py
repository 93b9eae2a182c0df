"""The conversation archive: every message said to and by an agent, kept after the history cap trims it.

One item per archived message part, in the agent's partition of the single table (so deleting the
agent deletes it, and a key built from one tenant can never reach another's items):

    PK      <t>#A#<agentId>
    SK      ARCH#<sessionId>#<createdAt>#<runId>#<seq>   one session's archive = one begins_with Query
    GSI1PK  <t>#A#<agentId>#ARCH
    GSI1SK  <archivedAt>#<sessionId>#<runId>#<seq>       a cache reads only what is newer than it holds
    attrs   kind=msg, sessionId, role, speaker?, text, runId, seq, part?, createdAt, archivedAt, tools?

What is archived (of a successful turn): the user's message and every assistant message's text
blocks. Tool calls and tool results are not archived as text (they are data the agent fetched,
not things said); an assistant message that called tools records their names in `tools`.
A message longer than ``TEXT_CAP`` (4,000) characters is split at whitespace into parts of at most
that size, each its own item (at most ``MAX_PARTS`` = 8 parts, 32,000 characters, per message), so
an item stays small (well under 20 KB) and a long reply stays searchable to its end.

Archiving costs no extra AWS call on the hot path: ``items_for_turn`` builds plain items that
``RunRepository.finish_turn`` adds to the turn's own TransactWriteItems.

Deleting a session (``delete_session``) deletes its items with a Query + BatchWriteItem and writes a
tombstone (SK ``ARCHDEL#<sessionId>#<deletedAt>``, in the same GSI1 partition, expiring after
``TOMBSTONE_TTL_S``) so that warm search caches in other containers drop the session's turns on their
next incremental read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from engram.aws import keys
from engram.aws.table import Table
from engram.kernel.model import now_iso

TEXT_CAP = 4000
MAX_PARTS = 8
TOMBSTONE_TTL_S = 2 * 24 * 3600
KIND_MESSAGE = "msg"
KIND_TOMBSTONE = "session_deleted"


def message_text(message: Mapping[str, object]) -> str:
    """The text blocks of a message, joined (tool_use / tool_result / images are left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    texts = [
        b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(t.strip() for t in texts if t.strip())


def _tool_names(message: Mapping[str, object]) -> list[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [str(b.get("name")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name")]


def split_text(text: str, cap: int = TEXT_CAP, max_parts: int = MAX_PARTS) -> list[str]:
    """Parts of at most ``cap`` characters, cut at whitespace where possible; at most ``max_parts``."""
    parts: list[str] = []
    rest = text
    while rest and len(parts) < max_parts:
        if len(rest) <= cap:
            parts.append(rest)
            break
        cut = rest.rfind(" ", cap // 2, cap + 1)
        if cut <= 0:
            cut = rest.rfind("\n", cap // 2, cap + 1)
        if cut <= 0:
            cut = cap
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return [p for p in parts if p]


# Called with (table, tenant, agent_id) after a session's archive is deleted: a warm search cache
# in this process (recall.index registers itself on import) forgets the agent at once; caches in
# other containers drop the session on their next read, through the tombstone.
_session_deleted_hooks: list[Callable[[str, str, str], None]] = []


def on_session_deleted(hook: Callable[[str, str, str], None]) -> None:
    _session_deleted_hooks.append(hook)


class ArchiveRepository:
    def __init__(self, table: Table):
        self.table = table

    @property
    def name(self) -> str:
        """The table's name: warm search caches are keyed by it."""
        return self.table.name

    # --- writing ------------------------------------------------------------------------------
    def items_for_turn(
        self,
        tenant: str,
        agent_id: str,
        session_id: str,
        run_id: str,
        messages: Sequence[Mapping[str, object]],
        created_at: str,
        *,
        speakers: dict[str, str] | None = None,
        archived_at: str | None = None,
    ) -> list[dict[str, object]]:
        """Plain attribute dicts (keys included) for the text messages of one turn, ready for ``serialize``.

        ``speakers`` maps a role to a label (e.g. a person's name); ``archived_at`` (default
        ``created_at``) orders GSI1 and should be the write time, so backfills pass "now".
        """
        pk = keys.agent_pk(tenant, agent_id)
        gsi_pk = keys.archive_by_agent(tenant, agent_id)
        archived_at = archived_at or created_at
        items: list[dict[str, Any]] = []
        seq = 0
        for message in messages:
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            if role not in ("user", "assistant"):
                continue
            text = message_text(message)
            if not text:
                continue  # tool_result carriers and tool-only assistant messages
            tools = _tool_names(message) if role == "assistant" else []
            parts = split_text(text)
            for part_no, part in enumerate(parts):
                item: dict[str, Any] = {
                    "PK": pk,
                    "SK": keys.archive_sk(session_id, created_at, run_id, seq),
                    "GSI1PK": gsi_pk,
                    "GSI1SK": keys.archive_gsi_sk(archived_at, session_id, run_id, seq),
                    "kind": KIND_MESSAGE,
                    "sessionId": session_id,
                    "runId": run_id,
                    "seq": seq,
                    "role": role,
                    "text": part,
                    "createdAt": created_at,
                    "archivedAt": archived_at,
                }
                if len(parts) > 1:
                    item["part"] = part_no
                speaker = (speakers or {}).get(role)
                if speaker:
                    item["speaker"] = speaker[:100]
                if tools:
                    item["tools"] = tools[:20]
                items.append(item)
                seq += 1
        return items

    def put_many(self, tenant: str, agent_id: str, items: Sequence[Mapping[str, object]]) -> int:
        """BatchWriteItem in batches of 25, retrying unprocessed items with backoff. Returns the count."""
        pk = keys.agent_pk(tenant, agent_id)
        for item in items:
            if item.get("PK") != pk or not str(item.get("SK", "")).startswith(keys.archive_prefix()):
                raise ValueError("put_many only writes archive items of this agent")
        self.table.batch_write(puts=items)
        return len(items)

    # --- reading ------------------------------------------------------------------------------
    def load_since(self, tenant: str, agent_id: str, after: str | None, *, limit: int | None = None) -> list[dict[str, object]]:
        """Archive items (and tombstones) whose GSI1SK sorts after ``after``, oldest first.

        ``after`` is an archivedAt prefix (e.g. an ISO timestamp); None reads everything.
        ``limit`` keeps only the newest ``limit`` items (read newest first, returned oldest first).
        """
        gsi_pk = keys.archive_by_agent(tenant, agent_id)
        after = keys.check_stamp("after", after) if after else None
        if limit is None:
            return self.table.query_all(gsi_pk, index="GSI1", sk_after=after)
        newest = self.table.query_all(gsi_pk, index="GSI1", sk_after=after, newest_first=True, max_items=limit)
        return newest[::-1]

    def agent_items(self, tenant: str, agent_id: str, *, page_size: int = 500) -> Iterator[dict[str, object]]:
        """Every archived message of an agent (all its sessions), session by session in time order,
        one page in memory at a time (account export); tombstones are not messages."""
        token: str | None = None
        while True:
            items, token = self.table.query(
                keys.agent_pk(tenant, agent_id), sk_prefix=keys.archive_prefix(), limit=page_size, token=token
            )
            yield from (i for i in items if i.get("kind") == KIND_MESSAGE)
            if not token:
                return

    def session_items(self, tenant: str, agent_id: str, session_id: str) -> list[dict[str, object]]:
        """A session's archive in time order (strongly consistent: it reads the base table)."""
        return self.table.query_all(
            keys.agent_pk(tenant, agent_id), sk_prefix=keys.archive_session_prefix(session_id), consistent=True
        )

    # --- deleting -----------------------------------------------------------------------------
    def delete_session(self, tenant: str, agent_id: str, session_id: str) -> int:
        """Deletes one session's archive and leaves a tombstone for warm caches. Returns the count."""
        pk = keys.agent_pk(tenant, agent_id)
        deleted = self.table.delete_all(pk, sk_prefix=keys.archive_session_prefix(session_id), consistent=True)
        now = now_iso()
        tombstone = {
            "PK": pk,
            "SK": keys.archive_tombstone_sk(session_id, now),
            "GSI1PK": keys.archive_by_agent(tenant, agent_id),
            "GSI1SK": keys.archive_tombstone_gsi_sk(now, session_id),
            "kind": KIND_TOMBSTONE,
            "sessionId": session_id,
            "archivedAt": now,
            "expiresAt": int(time.time()) + TOMBSTONE_TTL_S,
        }
        self.table.put(tombstone)
        for hook in _session_deleted_hooks:
            hook(self.name, tenant, agent_id)
        return deleted
