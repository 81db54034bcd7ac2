"""Standing grants: at most one in force per what it approves (migration 0012's constraints). Each grant gets
`current` (holds its place among like grants) and `revoked_reason`; here, before the constraints, the grants
that no longer hold a place are retired (revoked or ended: `current` False) and duplicates in force are ended.

Duplicates: two or more grants in force that approve the same tickets (same agent, tool, kind, policy and
conversation, or requester for scope "user"). The newest given stays in force (the latest decision about
them); each older one is ended now, as a revocation by nobody with its reason recorded on it ("ended by
migration 0011: a duplicate of standing grant #N"), shown on the grants page and in the API (`revokedReason`).
Nothing is deleted: who gave what, and which tickets each approved, stays.
"""

from django.db import migrations, models
from django.utils import timezone

REASON = "Ended by migration 0011: a duplicate of standing grant #{keep}, which stays in force."


def _key(grant):
    who = grant.session_id if grant.scope == "session" else grant.requester
    return (grant.scope, grant.app_name, grant.tool_name, grant.kind, who, grant.policy_id)


def retire_and_end_duplicates(apps, schema_editor):
    StandingGrant = apps.get_model("approvals", "StandingGrant")
    now = timezone.now()
    StandingGrant.objects.filter(
        models.Q(revoked_at__isnull=False) | models.Q(expires_at__lte=now), current=True
    ).update(current=False)
    kept: dict = {}
    in_force = StandingGrant.objects.filter(revoked_at__isnull=True, expires_at__gt=now)
    for grant in in_force.order_by("-created_at", "-id").iterator():
        keep = kept.setdefault(_key(grant), grant.pk)
        if keep != grant.pk:
            StandingGrant.objects.filter(pk=grant.pk).update(
                revoked_at=now, revoked_by=None, revoked_reason=REASON.format(keep=keep), current=False
            )


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0013_turn_finished_at_index"),
        ("approvals", "0010_ticket_participant"),
    ]

    operations = [
        migrations.AddField(
            model_name="standinggrant",
            name="revoked_reason",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="standinggrant",
            name="current",
            field=models.BooleanField(db_default=True, default=True),
        ),
        migrations.RunPython(retire_and_end_duplicates, migrations.RunPython.noop),
    ]
