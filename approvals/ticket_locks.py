"""A decision's locks: the session's row and the ticket's, taken first in every decision's transaction
(approvals.decisions), in that order: the order the session store's append (which may touch a ticket)
takes them; after the decider's row (approvals.decider), as a person's row comes before a ticket's."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from adkweb.compiled import rows, rows_after_each
from agents_app.models import AdkSession
from agents_app.services import session_lock

from . import decider
from .models import PendingCall


def ticket_fields() -> list[str]:
    """A ticket's columns, in the order its compiled reads select them (PendingCall.from_db's)."""
    return [f.attname for f in PendingCall._meta.concrete_fields]


def _ticket_locking(pk: int) -> QuerySet:
    return PendingCall.objects.select_for_update(of=("self",)).filter(pk=pk).order_by().values_list(*ticket_fields())


# agents_app.services.session_lock's statement (FOR NO KEY UPDATE of a live session's row), written out
# to go with the ticket's lock in one round trip. By its primary key: `(archived_at IS NULL) IS TRUE` is no
# index condition (plain, a stale-statistics plan walked every live session's archived_at entry).
_SESSION_LOCK = (
    f"SELECT id FROM {AdkSession._meta.db_table} WHERE id = %s AND (archived_at IS NULL) IS TRUE FOR NO KEY UPDATE"
)


def session_and_ticket_locked(
    session_pk: int, ticket_pk: int, actor: Any = None
) -> tuple[bool, dict[int, PendingCall], Any]:
    """The session's row locked (True; False: no live session, nothing locked), then the ticket, as it
    is now (FOR UPDATE), both to the end of the transaction: two statements in one round trip on
    PostgreSQL (one after the other, in this order), the ticket's compiled once per process; who
    closed or edited it is read only when a refusal names them. As a decision's first statements (a
    click's, a /run answer's), the transaction's BEGIN leads them (`compiled.begun_with`): psycopg sent
    it as a round trip of its own, on the path of the worker's claim, which waits for the COMMIT.
    `actor`: the decider, their row locked and their rights read first in the same round trip
    (approvals.decider), returned as they are now (the third value)."""
    db = transaction.get_connection()
    if db.vendor != "postgresql":  # SQLite: no row locks (its writer holds the whole file)
        return session_lock(session_pk), tickets_locked([ticket_pk]), decider.decider_read(actor)
    leads = decider.statements(actor)
    found, ticket_rows = rows_after_each(
        [*leads, (_SESSION_LOCK, [session_pk])], "decision_ticket_lock", (), _ticket_locking, ticket_pk, begin=True
    )
    tickets = [PendingCall.from_db(db.alias, ticket_fields(), row) for row in ticket_rows]
    return bool(found[-1]), {t.pk: t for t in tickets}, decider.decider_from(actor, found[: len(leads)])


def tickets_locked(pks: list[int]) -> dict[int, PendingCall]:
    """The tickets, locked (FOR UPDATE) to the end of the transaction, as they are now. One ticket
    in a statement compiled once per process."""
    if len(pks) == 1:
        db = transaction.get_connection()
        found = [
            PendingCall.from_db(db.alias, ticket_fields(), row)
            for row in rows("decision_ticket_lock", (), _ticket_locking, pks[0])
        ]
        return {t.pk: t for t in found}
    return {t.pk: t for t in PendingCall.objects.select_for_update(of=("self",)).filter(pk__in=pks)}
