"""One enabled webhook endpoint per URL (notifications.models.WebhookEndpoint): migration 0003 left one per
URL. Its own migration: on PostgreSQL the index is built after 0003's updates have committed."""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notifications", "0003_webhook_one_url")]

    operations = [
        migrations.AddConstraint(
            model_name="webhookendpoint",
            constraint=models.UniqueConstraint(
                django.db.models.functions.text.MD5("url"),
                condition=models.Q(("enabled", True)),
                name="webhook_one_enabled_per_url",
                violation_error_message="Another enabled webhook endpoint has this URL.",
            ),
        ),
    ]
