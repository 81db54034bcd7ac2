"""Who takes part in each ticket (approvals.models.TicketParticipant), for the inbox's "mine": the table,
filled from the tickets and responses there are, then kept by triggers on both databases.

A person takes part in a ticket while it is assigned to them, was closed by them, or has a response of
theirs; each row carries the ticket's open state and created_at. The triggers fire on every write that
can change that (a response written, re-pointed by a user's deletion or removed; a ticket inserted,
deleted, or updated in its status, created_at, assignee or closer), in the writer's own transaction.
On PostgreSQL a response's trigger takes the ticket's row lock (FOR SHARE) before reading its status:
a decision and a close racing on one ticket then write their rows one after the other, and the row
a response adds carries the status the ticket has once the other committed. Every path in the app
already holds the ticket FOR UPDATE when it writes a response, so that lock costs no wait there.

Fast on a big table: one INSERT ... SELECT of the three sets (the tables locked against writes
meanwhile, so no write falls between the copy and the triggers), then the constraint and indexes
built over the filled table.
"""

from django.conf import settings
from django.db import migrations, models

OPEN = "('pending', 'in_progress')"  # approvals.models.PendingCall.OPEN_STATUSES
TICKETS, RESPONSES, PARTS = "approvals_pendingcall", "approvals_response", "approvals_ticketparticipant"

BACKFILL = (
    f"INSERT INTO {PARTS} (ticket_id, person_id, created_at, is_open) "
    f"SELECT t.id, m.person_id, t.created_at, t.status IN {OPEN} FROM ("
    f"SELECT id AS ticket_id, assigned_to_id AS person_id FROM {TICKETS} WHERE assigned_to_id IS NOT NULL "
    f"UNION SELECT id, closed_by_id FROM {TICKETS} WHERE closed_by_id IS NOT NULL "
    f"UNION SELECT pending_call_id, actor_id FROM {RESPONSES} WHERE actor_id IS NOT NULL"
    f") m JOIN {TICKETS} t ON t.id = m.ticket_id"
)

# A (ticket, person) pair no longer taking part: no assignment, close or response of theirs left.
_GONE = (
    "NOT EXISTS (SELECT 1 FROM {t} t WHERE t.id = {ticket} AND (t.assigned_to_id = {person} "
    "OR t.closed_by_id = {person})) AND NOT EXISTS (SELECT 1 FROM {r} r WHERE r.pending_call_id = {ticket} "
    "AND r.actor_id = {person})"
)


def _drop_pair(ticket: str, person: str) -> str:
    gone = _GONE.format(t=TICKETS, r=RESPONSES, ticket=ticket, person=person)
    return f"DELETE FROM {PARTS} WHERE ticket_id = {ticket} AND person_id = {person} AND {gone};"


def _add_responder(ignore: str, conflict: str) -> str:
    return (
        f"INSERT {ignore} INTO {PARTS} (ticket_id, person_id, created_at, is_open) "
        f"SELECT t.id, NEW.actor_id, t.created_at, t.status IN {OPEN} FROM {TICKETS} t "
        f"WHERE t.id = NEW.pending_call_id AND NEW.actor_id IS NOT NULL {conflict};"
    )


def _ticket_update() -> str:
    return (
        f"UPDATE {PARTS} SET is_open = (NEW.status IN {OPEN}), created_at = NEW.created_at "
        f"WHERE ticket_id = NEW.id AND (is_open <> (NEW.status IN {OPEN}) OR created_at <> NEW.created_at);"
        + _drop_pair("NEW.id", "OLD.assigned_to_id")
        + _drop_pair("NEW.id", "OLD.closed_by_id")
    )


def _add_assignee_closer(ignore: str, conflict: str) -> str:
    return (
        f"INSERT {ignore} INTO {PARTS} (ticket_id, person_id, created_at, is_open) "
        f"SELECT NEW.id, m.person_id, NEW.created_at, NEW.status IN {OPEN} FROM "
        f"(SELECT NEW.assigned_to_id AS person_id UNION SELECT NEW.closed_by_id) m "
        f"WHERE m.person_id IS NOT NULL {conflict};"
    )


_TICKET_CHANGED = (
    "OLD.status IS DISTINCT FROM NEW.status OR OLD.created_at IS DISTINCT FROM NEW.created_at "
    "OR OLD.assigned_to_id IS DISTINCT FROM NEW.assigned_to_id OR OLD.closed_by_id IS DISTINCT FROM NEW.closed_by_id"
)
_RESPONSE_MOVED = (
    "OLD.actor_id IS DISTINCT FROM NEW.actor_id OR OLD.pending_call_id IS DISTINCT FROM NEW.pending_call_id"
)
_TICKET_COLUMNS = "status, created_at, assigned_to_id, closed_by_id"
_RESPONSE_COLUMNS = "actor_id, pending_call_id"

_PG_CONFLICT = "ON CONFLICT (ticket_id, person_id) DO NOTHING"
_PG_LOCK = f"PERFORM 1 FROM {TICKETS} WHERE id = NEW.pending_call_id FOR SHARE;"
PG_FUNCTIONS = {
    "approvals_participant_response": (
        "IF TG_OP <> 'INSERT' THEN "
        + _drop_pair("OLD.pending_call_id", "OLD.actor_id")
        + " END IF; IF TG_OP <> 'DELETE' THEN "
        + _PG_LOCK
        + _add_responder("", _PG_CONFLICT)
        + " END IF;"
    ),
    "approvals_participant_ticket": (
        f"IF TG_OP = 'DELETE' THEN DELETE FROM {PARTS} WHERE ticket_id = OLD.id; RETURN NULL; END IF; "
        "IF TG_OP = 'UPDATE' THEN " + _ticket_update() + " END IF; " + _add_assignee_closer("", _PG_CONFLICT)
    ),
}
# (name, when, table, function, condition)
_TRIGGERS = [
    ("participant_response_insert", "INSERT", RESPONSES, "response", "NEW.actor_id IS NOT NULL"),
    ("participant_response_update", f"UPDATE OF {_RESPONSE_COLUMNS}", RESPONSES, "response", _RESPONSE_MOVED),
    ("participant_response_delete", "DELETE", RESPONSES, "response", "OLD.actor_id IS NOT NULL"),
    (
        "participant_ticket_insert",
        "INSERT",
        TICKETS,
        "ticket",
        "NEW.assigned_to_id IS NOT NULL OR NEW.closed_by_id IS NOT NULL",
    ),
    ("participant_ticket_update", f"UPDATE OF {_TICKET_COLUMNS}", TICKETS, "ticket", _TICKET_CHANGED),
    ("participant_ticket_delete", "DELETE", TICKETS, "ticket", ""),
]


def _pg_forward() -> list[str]:
    out = [
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NULL; END $$;"
        for name, body in PG_FUNCTIONS.items()
    ]
    for name, when, table, function, condition in _TRIGGERS:
        where = f" WHEN ({condition})" if condition else ""
        out.append(
            f"CREATE TRIGGER {name} AFTER {when} ON {table} FOR EACH ROW{where} "
            f"EXECUTE FUNCTION approvals_participant_{function}();"
        )
    return out


def _sqlite_body(name: str) -> str:
    """SQLite has no trigger functions: each trigger's statements inline (one writer at a time: no lock)."""
    ignore = "OR IGNORE"
    return {
        "participant_response_insert": _add_responder(ignore, ""),
        "participant_response_update": _drop_pair("OLD.pending_call_id", "OLD.actor_id") + _add_responder(ignore, ""),
        "participant_response_delete": _drop_pair("OLD.pending_call_id", "OLD.actor_id"),
        "participant_ticket_insert": _add_assignee_closer(ignore, ""),
        "participant_ticket_update": _ticket_update() + _add_assignee_closer(ignore, ""),
        "participant_ticket_delete": f"DELETE FROM {PARTS} WHERE ticket_id = OLD.id;",
    }[name]


def _sqlite_forward() -> list[str]:
    out = []
    for name, when, table, _function, condition in _TRIGGERS:
        where = f" WHEN {condition}" if condition else ""
        out.append(f"CREATE TRIGGER {name} AFTER {when} ON {table} FOR EACH ROW{where} BEGIN {_sqlite_body(name)} END;")
    return out


def backfill(apps, schema_editor) -> None:  # noqa: ANN001
    """The pairs there are, before the constraint and indexes (built once over the filled table). On
    PostgreSQL the tables stay locked against writes until the migration commits, with the triggers."""
    with schema_editor.connection.cursor() as cursor:
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute(f"LOCK TABLE {TICKETS}, {RESPONSES} IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(BACKFILL)


def triggers(apps, schema_editor) -> None:  # noqa: ANN001
    """Last: SQLite remakes a table to add a constraint, which its triggers' references would not survive."""
    vendor = schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        for sql in _pg_forward() if vendor == "postgresql" else _sqlite_forward():
            cursor.execute(sql)
        if vendor == "postgresql":  # statistics now: unanalysed, the planner took the table for a few rows
            cursor.execute(f"ANALYZE {PARTS}")


def triggers_drop(apps, schema_editor) -> None:  # noqa: ANN001
    with schema_editor.connection.cursor() as cursor:
        for name, _when, table, _function, _condition in _TRIGGERS:
            on = f" ON {table}" if schema_editor.connection.vendor == "postgresql" else ""
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}{on}")
        if schema_editor.connection.vendor == "postgresql":
            for name in PG_FUNCTIONS:
                cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0009_ticket_newest_covering"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="TicketParticipant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField()),
                ("is_open", models.BooleanField()),
                (
                    "person",
                    models.ForeignKey(
                        db_index=False, on_delete=models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "ticket",
                    models.ForeignKey(
                        db_index=False, on_delete=models.deletion.CASCADE, related_name="+", to="approvals.pendingcall"
                    ),
                ),
            ],
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="ticketparticipant",
            constraint=models.UniqueConstraint(fields=("ticket", "person"), name="participant_ticket_person"),
        ),
        migrations.AddIndex(
            model_name="ticketparticipant",
            index=models.Index(fields=["person", "-created_at", "-ticket"], name="participant_newest"),
        ),
        migrations.AddIndex(
            model_name="ticketparticipant",
            index=models.Index(
                condition=models.Q(("is_open", True)),
                fields=["person", "-created_at", "-ticket"],
                name="participant_open_newest",
            ),
        ),
        migrations.RunPython(triggers, triggers_drop),
    ]
