"""The decision chain: every Response, in the order decisions were stored, hashed over the one
before it. Changing, removing or inserting a decision after the fact breaks the chain from that
row on, and `manage.py audit_verify` names the first broken row.

Each link hashes: the previous link's hash, the row's place and id, its ticket, who decided (the
username and display name snapshot, the source, the grant), when, what the decider was shown
(the arguments hash), what was sent (action, final, payload, comment, edited arguments) and, for
the decision that closed a quorum ticket, the held approvals that counted then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import UTC
from typing import Any

GENESIS = "0" * 64


def decision_fields(row: Any) -> dict[str, Any]:
    """What a link covers, from a Response row (or a migration's historical one). `counted` (the held
    approvals a quorum ticket closed with) only where the row has it: a row without it hashes as before."""
    fields = {
        "seq": row.chain_seq,
        "id": row.pk,
        "ticket": row.pending_call_id,
        "who": {
            "username": row.actor_username,
            "name": row.actor_name,
            "source": row.source,
            "grant": row.grant_id,
        },
        "when": row.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "shown": row.args_hash,
        "sent": {
            "action": row.action,
            "final": row.final,
            "payload": row.payload,
            "comment": row.comment,
            "edited_args": row.edited_args,
        },
    }
    counted = getattr(row, "counted", None)
    if counted is not None:
        fields["counted"] = counted
    return fields


def link_hash(previous: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(f"{previous}\n{canonical}".encode()).hexdigest()


def link(responses: Iterable[Any]) -> None:
    """Append these just-stored decisions to the chain, in this order (inside their transaction).
    The head row is locked last and held to commit: concurrent decisions queue here, briefly."""
    from .models import DecisionChain, Response

    rows = [r for r in responses if r.chain_seq is None]
    if not rows:
        return
    if len(rows) == 1 and (_link_one(rows[0]) or _link_one_compiled(rows[0])):
        return
    head = DecisionChain.objects.select_for_update().filter(pk=1).order_by().first()
    if head is None:  # the first decision ever (a concurrent first one waits on the key, then adds nothing)
        DecisionChain.objects.bulk_create([DecisionChain(pk=1)], ignore_conflicts=True)
        head = DecisionChain.objects.select_for_update().get(pk=1)
    stored = Response.objects.in_bulk([r.pk for r in rows])  # hash what the database holds, as it reads back
    for row in rows:
        row.chain_seq = head.length + 1
        fields = decision_fields(stored[row.pk])
        fields["seq"] = row.chain_seq
        row.chain_hash = link_hash(head.last_hash or GENESIS, fields)
        Response.objects.filter(pk=row.pk).update(chain_seq=row.chain_seq, chain_hash=row.chain_hash)
        head.length, head.last_hash, head.last_response_id = row.chain_seq, row.chain_hash, row.pk
    head.save()


# One decision on PostgreSQL (every click, almost every /run) in two statements instead of four: the
# head locked and the row read back in one, the row's link and the head written in the other (a
# data-modifying WITH: one statement, all or nothing). Same lock, same order, same bytes hashed.
@dataclass
class _Stored:
    """A Response as the database holds it: what `decision_fields` reads (a field added there is added
    here; the PostgreSQL chain tests go red otherwise). Its fields name the columns `_HEAD_AND_ROW` reads."""

    pk: int
    pending_call_id: int
    actor_username: str
    actor_name: str
    source: str
    grant_id: int | None
    created_at: Any
    args_hash: str
    action: str
    final: bool
    payload: Any
    comment: str
    edited_args: Any
    counted: Any
    chain_seq: int | None = None


_STORED_COLUMNS = ["id" if f.name == "pk" else f.name for f in dataclass_fields(_Stored) if f.name != "chain_seq"]
_RESPONSE_COLUMNS = ", ".join(f"r.{name}" for name in _STORED_COLUMNS)
STORED = ", ".join(_STORED_COLUMNS)  # a Response's columns a link hashes, in `link_returned`'s order
_HEAD_AND_ROW = (
    f"SELECT h.length, h.last_hash, {_RESPONSE_COLUMNS} "
    "FROM approvals_decisionchain h JOIN approvals_response r ON r.id = %s WHERE h.id = 1 FOR UPDATE OF h"
)
HEAD_LOCKED = "SELECT length, last_hash FROM approvals_decisionchain WHERE id = 1 FOR UPDATE"
_WRITE = (
    "WITH r AS (UPDATE approvals_response SET chain_seq = %s, chain_hash = %s WHERE id = %s RETURNING id) "
    "UPDATE approvals_decisionchain SET length = %s, last_hash = %s, last_response_id = (SELECT id FROM r) "
    "WHERE id = 1"
)


def _json(value: Any) -> Any:
    """A jsonb column as Django's PostgreSQL backend hands it over (text), decoded as JSONField does."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _link_one(row: Any) -> bool:
    """`link([row])` on PostgreSQL; False elsewhere, or before the first decision ever (no head yet):
    then the ORM path does it."""
    from django.db import transaction

    db = transaction.get_connection()
    if db.vendor != "postgresql":
        return False
    with db.cursor() as cursor:
        cursor.execute(_HEAD_AND_ROW, [row.pk])
        found = cursor.fetchone()
    if found is None:
        return False  # no head row yet (or no such response): the ORM path creates it
    return link_returned(row, found[:2], found[2:])


def _head(pk: int) -> Any:
    from .models import DecisionChain

    return DecisionChain.objects.filter(pk=pk).order_by().values_list("length", "last_hash")


def _response(pk: int) -> Any:
    from .models import Response

    return Response.objects.filter(pk=pk).order_by()


_LINKED = "UPDATE approvals_response SET chain_seq = %s, chain_hash = %s WHERE id = %s"
_HEAD_WRITE = "UPDATE approvals_decisionchain SET length = %s, last_hash = %s, last_response_id = %s WHERE id = 1"


def _link_one_compiled(row: Any) -> bool:
    """`link([row])` on SQLite (every decision in embedded mode): the head and the row read in
    statements compiled once per process (the row built by `from_db`, as `in_bulk` builds it: the same
    converters, so the same bytes hashed), the two writes in plain SQL, where the ORM compiled all
    four per call (~1 ms of a decision's CPU). No lock to take: SQLite's write transaction holds the
    whole file from its BEGIN (IMMEDIATE, adkweb.sqlite3), as `select_for_update` could not add to.
    False on PostgreSQL (`_link_one`'s) and before the first decision ever (no head yet)."""
    from django.db import transaction

    from adkweb import compiled

    from .models import Response

    db = transaction.get_connection()
    if db.vendor != "sqlite":
        return False
    head = compiled.rows("chain_head", (), _head, 1)
    stored = compiled.instances(Response, "chain_response", _response, row.pk)
    if not head or not stored:
        return False
    length, last_hash = head[0]
    seq = length + 1
    fields = decision_fields(stored[0])
    fields["seq"] = seq
    digest = link_hash(last_hash or GENESIS, fields)
    with db.cursor() as cursor:
        cursor.execute(_LINKED, [seq, digest, row.pk])
        cursor.execute(_HEAD_WRITE, [seq, digest, row.pk])
    row.chain_seq, row.chain_hash = seq, digest
    return True


def link_returned(row: Any, head: Any, stored: Any) -> bool:
    """`link([row])` on PostgreSQL where the caller read, in its transaction, the head (`HEAD_LOCKED`'s
    row: locked to commit; None when there is none yet) and the row as the database holds it (its
    `STORED` columns, e.g. its INSERT's RETURNING): the link written, in one statement. False when there
    is no head yet (the first decision ever): `link` then does it."""
    from django.db import connection

    if head is None:
        return False
    length, last_hash = head
    found = _Stored(*stored)
    for name in ("payload", "edited_args", "counted"):
        setattr(found, name, _json(getattr(found, name)))
    seq = length + 1
    fields = decision_fields(found)
    fields["seq"] = seq
    digest = link_hash(last_hash or GENESIS, fields)
    with connection.cursor() as cursor:
        cursor.execute(_WRITE, [seq, digest, row.pk, seq, digest])
    row.chain_seq, row.chain_hash = seq, digest
    return True


@dataclass
class Break:
    response_id: int | None
    seq: int | None
    ticket_id: int | None
    reason: str

    def __str__(self) -> str:
        where = f"response #{self.response_id}" if self.response_id else "the chain's head"
        pos = f" (chain position {self.seq}, ticket #{self.ticket_id})" if self.seq else ""
        return f"{where}{pos}: {self.reason}"


def verify(rows: Iterable[Any], head: Any | None) -> Iterator[Break]:
    """Every break in the chain, first first. `rows`: Responses ordered by chain_seq, nulls last."""
    previous, expected, last_id = GENESIS, 1, None
    for row in rows:
        if row.chain_seq is None:
            yield Break(row.pk, None, row.pending_call_id, "not in the chain (stored without its link)")
            continue
        if row.chain_seq != expected:
            missing = (
                f"position {expected}" if row.chain_seq == expected + 1 else f"positions {expected}–{row.chain_seq - 1}"
            )
            yield Break(
                row.pk, row.chain_seq, row.pending_call_id, f"the decision(s) at {missing} before it are missing"
            )
        if link_hash(previous, decision_fields(row)) != row.chain_hash:
            yield Break(
                row.pk,
                row.chain_seq,
                row.pending_call_id,
                "its hash does not match its content and the link before it (changed after it was written)",
            )
        previous, expected, last_id = row.chain_hash, row.chain_seq + 1, row.pk
    length = expected - 1
    if head is None:
        if length:
            yield Break(None, None, None, f"missing, though {length} decisions are chained")
        return
    if head.length != length or (length and (head.last_hash != previous or head.last_response_id != last_id)):
        yield Break(
            None,
            None,
            None,
            f"it records {head.length} decisions ending with response #{head.last_response_id}; "
            f"the table holds {length} ending with #{last_id} (decisions removed from the end?)",
        )
