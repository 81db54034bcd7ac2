"""The decision that closes a quorum ticket records which of its held approvals counted then
(approvals.models.Response.counted). No backfill: who could decide a ticket closed earlier is not known
(today's groups and permissions are not then's); those tickets say their count was not recorded."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("approvals", "0012_grant_one_current")]

    operations = [
        migrations.AddField(
            model_name="response",
            name="counted",
            field=models.JSONField(
                blank=True,
                help_text="The held approvals that counted when this decision closed its ticket.",
                null=True,
            ),
        ),
    ]
