"""Drop the turns table's two indexes no query needs; each was written by every turn's insert and by both
its status updates. The session's own (its foreign key's) is a prefix of (session, status, id), which
serves every read by session; status's varchar_pattern_ops copy (Django's, for LIKE) served nothing: no
query asks a LIKE of a status. The status index itself stays (the sweeper, /metrics' oldest queued turn,
the cap's fallback), named in the model's Meta now (turn_status): renamed in place on PostgreSQL, not
built again."""

from django.db import migrations, models

TABLE = "agents_app_turn"
SESSION = "agents_app_turn_session_id_fcae6edc"  # Django's names for the field indexes (db_index)
STATUS = "agents_app_turn_status_02b4364d"


def forwards(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX IF EXISTS {SESSION}")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {STATUS}_like")
        schema_editor.execute(f"ALTER INDEX {STATUS} RENAME TO turn_status")
    else:  # SQLite renames no index
        schema_editor.execute(f"DROP INDEX IF EXISTS {STATUS}")
        schema_editor.execute(f"CREATE INDEX turn_status ON {TABLE} (status)")


def backwards(apps, schema_editor):
    schema_editor.execute(f"CREATE INDEX {SESSION} ON {TABLE} (session_id)")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER INDEX turn_status RENAME TO {STATUS}")
        schema_editor.execute(f"CREATE INDEX {STATUS}_like ON {TABLE} (status varchar_pattern_ops)")
    else:
        schema_editor.execute("DROP INDEX IF EXISTS turn_status")
        schema_editor.execute(f"CREATE INDEX {STATUS} ON {TABLE} (status)")


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0013_turn_finished_at_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="turn",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.PROTECT,
                        related_name="turns",
                        to="agents_app.adksession",
                    ),
                ),
                migrations.AlterField(
                    model_name="turn",
                    name="status",
                    field=models.CharField(
                        choices=[("queued", "queued"), ("running", "running"), ("done", "done"), ("failed", "failed")],
                        default="queued",
                        max_length=16,
                    ),
                ),
                migrations.AddIndex(
                    model_name="turn",
                    index=models.Index(fields=["status"], name="turn_status"),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
