"""A decision's decider as they are inside its transaction, not as the page or the API read them before it.

The rights a decision checks (approvals.permissions.decide_refusal: is_active, superuser and staff status,
permissions, groups) are read after the decider's row is locked FOR SHARE (PostgreSQL), in the decision's
transaction, before its session and ticket locks (a person's row before a ticket's, as takes and changes of
rights take them: approvals.assignees). Every change of a person's rights locks that row too (the groups,
permissions, deactivation and deletion hooks: approvals.assignees.assignees_recheck, assignee_deleting; an
UPDATE of the row itself), so a removal either commits before the decision reads the rights (the decision
is refused: 403, nothing written) or waits for the decision's commit (the decision was made by someone
allowed to, and the removal returns after it); never in between, a decision let through by rights an admin
had already taken away when it committed.

The cost on a click: no round trip. The row's lock and the permissions' read are two more statements in
the query string of the decision's first round trip (its BEGIN and the session's and ticket's locks:
approvals.ticket_locks); each statement of a query string takes its own snapshot, so the permissions read
after the lock see what the lock waited for. A decision of several tickets at once (a `/run` message
answering several calls) reads them in a round trip of its own, before its locks. On SQLite the decision's
transaction holds the database from its BEGIN (IMMEDIATE): the same reads, no lock, in it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import connection, transaction

from adkweb import roles
from adkweb.compiled import compiled, instances


def _fields() -> list[str]:
    return [f.attname for f in get_user_model()._meta.concrete_fields]


def _row_sql() -> str:
    """The person's row by pk, every column, locked FOR SHARE (the ORM spells no FOR SHARE)."""
    meta, quote = get_user_model()._meta, connection.ops.quote_name
    table = quote(meta.db_table)
    columns = ", ".join(f"{table}.{quote(str(f.column))}" for f in meta.concrete_fields)
    return f"SELECT {columns} FROM {table} WHERE {quote(str(meta.pk.column))} = %s FOR SHARE"


def is_person(actor: Any) -> bool:
    """Whether the decision is a person's (not the deadline sweep's or a policy's: no actor)."""
    return actor is not None and getattr(actor, "pk", None) is not None and actor.is_authenticated


def statements(actor: Any) -> list[tuple[str, list[Any]]]:
    """The statements that read the decider afresh on PostgreSQL, for the query string of the decision's
    first round trip (`decider_from` reads their rows): their row locked FOR SHARE, then their permissions.
    None for a decision that is no person's, or elsewhere."""
    if not is_person(actor) or transaction.get_connection().vendor != "postgresql":
        return []
    return [(compiled("decider_row_share", (), _row_sql), [actor.pk]), roles.permissions_of(actor.pk)]


def decider_from(actor: Any, found: list[list[tuple]]) -> Any:
    """The decider as `statements`' rows give them (`found`, in their order): a user object of their row as
    it is now, holding their permissions as read after its lock; a person deleted meanwhile is no one (the
    decision is refused: "log in to answer tickets."). Not a person's decision: `actor` as it is."""
    if not is_person(actor):
        return actor
    if not found:  # not PostgreSQL: read in the transaction, which holds the database
        return decider_read(actor)
    rows, permissions = found
    if not rows:
        return AnonymousUser()
    person = get_user_model().from_db(connection.alias, _fields(), rows[0])
    roles.permissions_loaded(person, permissions)
    return person


def decider_read(actor: Any) -> Any:
    """`decider_from` in a round trip of its own (PostgreSQL: the row locked, then the permissions read, in
    one query string), for a decision that has no round trip of its own to carry them."""
    if not is_person(actor):
        return actor
    leads = statements(actor)
    if leads:
        with connection.cursor() as cursor:
            cursor.execute("; ".join(sql for sql, _ in leads), [p for _, params in leads for p in params])
            rows = cursor.fetchall()
            cursor.nextset()
            return decider_from(actor, [rows, cursor.fetchall()])
    User = get_user_model()
    found = instances(User, "decider_row", lambda pk: User.objects.filter(pk=pk), actor.pk)
    if not found:
        return AnonymousUser()
    roles.load_permissions(found[0])
    return found[0]
