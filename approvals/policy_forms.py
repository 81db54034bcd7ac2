"""The policy form, shared by the Policies page and the Django admin: durations written as people
write them ("1d", "4h 30m", "90s"), and the same checks as the API (`approvals.policies.problems`)."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from adkweb.http import number
from adkweb.storable import StorableIdsField

from .models import Policy
from .policies import problems

# ASCII digits only (re.ASCII): Python's \d also matches other scripts' digits.
DURATION = re.compile(
    r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s?)?\s*$", re.IGNORECASE | re.ASCII
)
MAX_SECONDS = 366 * 24 * 3600


def parse_duration(text: str) -> int | None:
    """Seconds from "1d 4h 30m 15s" (any part may be left out; a bare number is seconds). A part past a
    bigint is out of range as any too long duration is (int() refuses more than 4,300 digits: a 500)."""
    m = DURATION.match(text or "")
    if not m or not any(m.groups()):
        raise forms.ValidationError('Write a duration like "1d", "4h 30m", "90m" or "45s".')
    parts = [number(g or "0") for g in m.groups()]
    days, hours, minutes, seconds = (p or 0 for p in parts)
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    if None in parts or not 1 <= total <= MAX_SECONDS:
        raise forms.ValidationError("A duration goes from 1 second to 366 days.")
    return total


def format_duration(seconds: int | None) -> str:
    if not seconds:
        return ""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts)


class DurationField(forms.Field):
    """Seconds, written and shown as "1d 4h 30m"."""

    widget = forms.TextInput

    def prepare_value(self, value: Any) -> Any:
        return format_duration(value) if isinstance(value, int) else value

    def to_python(self, value: Any) -> int | None:
        text = str(value or "").strip()
        return parse_duration(text) if text else None


class PolicyForm(forms.ModelForm):
    due_in_seconds = DurationField(
        required=False, label="Due in", help_text='e.g. "1d": undecided by then, the ticket expires.'
    )
    remind_before_seconds = DurationField(
        required=False, label="Remind before due", help_text='e.g. "4h": a reminder is recorded (and sent).'
    )
    escalate_after_seconds = DurationField(
        required=False, label="Escalate after", help_text="Then the escalation groups see and may decide it too."
    )

    class Meta:
        model = Policy
        fields = [
            "name",
            "enabled",
            "agent",
            "tool",
            "kind",
            "condition",
            "priority",
            "approver_groups",
            "required_approvals",
            "four_eyes",
            "auto_decision",
            "auto_reason",
            "auto_confirmations",
            "due_in_seconds",
            "remind_before_seconds",
            "escalate_after_seconds",
            "escalation_groups",
            "allow_grants",
        ]
        widgets = {
            "condition": forms.Textarea(attrs={"rows": 2, "class": "mono", "spellcheck": "false"}),
            "approver_groups": forms.CheckboxSelectMultiple,
            "escalation_groups": forms.CheckboxSelectMultiple,
        }
        field_classes = {"approver_groups": StorableIdsField, "escalation_groups": StorableIdsField}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [("", "any kind of pause"), *Policy._meta.get_field("kind").choices]  # type: ignore[attr-defined, misc]
        self.fields["auto_decision"].choices = [("", "no: people decide"), *Policy.AutoDecision.choices]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        found = problems(
            data,
            approver_groups=list(data.get("approver_groups") or []),
            escalation_groups=list(data.get("escalation_groups") or []),
        )
        for field, message in found.items():
            if field in self.fields and field not in self.errors:
                self.add_error(field, message)
        return data

    def values(self) -> dict[str, Any]:
        """What `approvals.policies.policy_save` takes."""
        data = self.cleaned_data
        return {k: v for k, v in data.items() if k not in ("approver_groups", "escalation_groups")}
