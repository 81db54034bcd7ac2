"""Webhook endpoints: one enabled endpoint per URL (migration 0004's constraint); here, before it, the
duplicates a database already has are merged. Per URL with more than one enabled endpoint, the oldest
(lowest id: the one its receiver has known longest, with its secret, format and deliveries) stays enabled
and subscribes to every event any of them did (each event then reaches the URL once instead of once per
endpoint); each other one is disabled, not deleted (its secret, deliveries and attempts stay), its name
saying so: "duplicate of webhook #N (disabled by migration 0003)". An admin may delete them.
"""

from django.db import migrations

NOTE = "duplicate of webhook #{keep} (disabled by migration 0003)"


def merge_duplicates(apps, schema_editor):
    WebhookEndpoint = apps.get_model("notifications", "WebhookEndpoint")
    kept: dict = {}
    for endpoint in WebhookEndpoint.objects.filter(enabled=True).order_by("pk").iterator():
        keep = kept.setdefault(endpoint.url, endpoint)
        if keep.pk == endpoint.pk:
            continue
        keep.events = list(keep.events or []) + [e for e in endpoint.events or [] if e not in (keep.events or [])]
        keep.save(update_fields=["events"])
        note = NOTE.format(keep=keep.pk)
        endpoint.name = (f"{endpoint.name} — {note}" if endpoint.name else note)[-100:]
        endpoint.enabled = False
        endpoint.save(update_fields=["name", "enabled"])


class Migration(migrations.Migration):
    dependencies = [("notifications", "0002_link_protect")]

    operations = [migrations.RunPython(merge_duplicates, migrations.RunPython.noop)]
