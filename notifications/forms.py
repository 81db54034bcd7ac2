"""Forms: notification preferences, a one-tap link's confirmation, bulk decisions, saved views."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from adkweb.http import number
from approvals.forms import InboxFilterForm
from approvals.selectors import InboxFilters

MAX_BULK = 100


class PreferencesForm(forms.Form):
    email = forms.EmailField(required=False, max_length=254, label="Email address")
    email_enabled = forms.BooleanField(required=False, label="Email me about tickets")
    only_my_groups = forms.BooleanField(
        required=False,
        label="Only tickets routed to my groups",
        help_text="Superusers see every ticket; with this on, only tickets of groups you belong to email you.",
    )


class LinkConfirmForm(forms.Form):
    """The confirmation page's form: rejecting asks for the reason the agent receives."""

    reason = forms.CharField(required=False, max_length=2000, widget=forms.TextInput)

    def __init__(self, *args: Any, action: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reason"].required = action == "reject"


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[("approve", "approve"), ("reject", "reject")])
    reason = forms.CharField(required=False, max_length=2000, widget=forms.TextInput)
    confirm = forms.BooleanField(required=False)

    def __init__(self, data: QueryDict | None = None, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.raw_ids = data.getlist("ticket") if data is not None else []

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        ids: list[int] = []
        for raw in self.raw_ids:
            pk = number(str(raw))
            if pk is None or len(str(raw)) > 18:
                raise forms.ValidationError(f"Not a ticket number: {str(raw)[:30]!r}.")
            if pk not in ids:
                ids.append(pk)
        if not ids:
            raise forms.ValidationError("Select at least one ticket (x, or the row's checkbox).")
        if len(ids) > MAX_BULK:
            raise forms.ValidationError(f"At most {MAX_BULK} tickets at once; you selected {len(ids)}.")
        data["tickets"] = ids
        return data


class SavedViewForm(forms.Form):
    name = forms.CharField(max_length=40, label="View name")
    query = forms.CharField(required=False, max_length=600)

    def filters(self) -> InboxFilters:
        raw = (self.cleaned_data.get("query") or "").lstrip("?")
        return InboxFilterForm(QueryDict(raw)).filters()


def filters_query(filters: InboxFilters) -> str:
    """The canonical query string of inbox filters (defaults left out; never the page)."""
    defaults = InboxFilters()
    query = QueryDict(mutable=True)
    for name in ("q", "agent", "tool", "status", "kind", "sort"):
        value = getattr(filters, name)
        if value and value != getattr(defaults, name):
            query[name] = value
    if filters.mine:
        query["mine"] = "1"
    return query.urlencode()
