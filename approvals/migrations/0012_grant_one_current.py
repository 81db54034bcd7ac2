"""At most one current standing grant per what it approves (approvals.models.StandingGrant): migration 0011
left one per key. Its own migration: on PostgreSQL the index is built after 0011's updates have committed."""

import django.db.models.functions.comparison
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("approvals", "0011_grant_current")]

    operations = [
        migrations.AddConstraint(
            model_name="standinggrant",
            constraint=models.UniqueConstraint(
                models.F("app_name"),
                models.F("tool_name"),
                models.F("kind"),
                models.F("session"),
                django.db.models.functions.comparison.Coalesce(models.F("policy"), models.Value(0)),
                condition=models.Q(("current", True), ("scope", "session")),
                name="grant_one_current_per_session",
            ),
        ),
        migrations.AddConstraint(
            model_name="standinggrant",
            constraint=models.UniqueConstraint(
                models.F("app_name"),
                models.F("tool_name"),
                models.F("kind"),
                models.F("requester"),
                django.db.models.functions.comparison.Coalesce(models.F("policy"), models.Value(0)),
                condition=models.Q(("current", True), ("scope", "user")),
                name="grant_one_current_per_user",
            ),
        ),
    ]
