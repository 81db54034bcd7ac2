"""Inbox search also reads the arguments as an approver edited them: UPPER(edited_args::text) LIKE
'%TERM%', beside the arguments, the tool and the requester (0005). On PostgreSQL a trigram index on
exactly that expression keeps the search a bitmap of the four indexes rather than a sequential scan."""

from django.db import migrations

INDEX = "ticket_edited_args_trgm"


def trigram_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(
        f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON "approvals_pendingcall" '
        'USING gin ((UPPER(("edited_args")::text)) gin_trgm_ops)'
    )


def trigram_index_drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f'DROP INDEX IF EXISTS "{INDEX}"')


class Migration(migrations.Migration):
    dependencies = [("approvals", "0014_ticket_newest_escalation")]

    operations = [migrations.RunPython(trigram_index, trigram_index_drop, elidable=False)]
