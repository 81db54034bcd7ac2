"""Forms of the approvals pages: inbox filters and the four ticket actions."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from adkweb.storable import unstorable

from .models import PendingCall
from .selectors import InboxFilters

STATUS_CHOICES = [("open", "open"), *PendingCall.Status.choices, ("closed", "closed (any)"), ("all", "all")]
SORT_CHOICES = [("newest", "newest first"), ("oldest", "oldest first")]


class InboxFilterForm(forms.Form):
    agent = forms.CharField(required=False, max_length=128)
    tool = forms.CharField(required=False, max_length=128)
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    kind = forms.ChoiceField(required=False, choices=[("", "any kind"), *PendingCall.Kind.choices])
    mine = forms.BooleanField(required=False)
    q = forms.CharField(required=False, max_length=200, label="Search")
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES)
    page = forms.IntegerField(required=False, min_value=1)

    def filters(self) -> InboxFilters:
        """Filters from valid fields; an invalid field falls back to its default rather than erroring."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return InboxFilters(
            agent=data.get("agent") or "",
            tool=data.get("tool") or "",
            status=data.get("status") or "open",
            kind=data.get("kind") or "",
            mine=bool(data.get("mine")),
            q=(data.get("q") or "").strip(),
            sort=data.get("sort") or "newest",
            page=data.get("page") or 1,
        )


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def parse_json_object(text: str, *, label: str = "JSON") -> dict[str, Any]:
    """A JSON object from a textarea, or a ValidationError that says what is wrong and where."""
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(
            f"{label} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
        ) from exc
    except ValueError as exc:  # NaN / Infinity: not JSON, and PostgreSQL's jsonb refuses them
        raise forms.ValidationError(f"{label} is not valid JSON: {exc}.") from exc
    except RecursionError as exc:
        raise forms.ValidationError(f"{label} is not valid JSON: it is nested too deeply.") from exc
    if not isinstance(value, dict):
        raise forms.ValidationError(f'{label} must be a JSON object, e.g. {{"status": "approved"}}.')
    problem = unstorable(value)
    if problem:
        raise forms.ValidationError(f"{label} contains {problem}, which cannot be stored.")
    return value


class JsonObjectField(forms.CharField):
    widget = forms.Textarea(attrs={"rows": 5, "spellcheck": "false", "class": "mono"})

    def clean(self, value: Any) -> dict[str, Any] | None:
        text = super().clean(value)
        if not text:
            return None
        return parse_json_object(text, label=str(self.label or "JSON"))


class ApproveForm(forms.Form):
    comment = forms.CharField(required=False, max_length=2000, widget=forms.TextInput)
    payload = JsonObjectField(required=False, label="Payload (JSON, optional)")


class RejectForm(forms.Form):
    reason = forms.CharField(max_length=2000, widget=forms.TextInput, help_text="The agent receives this reason.")


class UpdateForm(forms.Form):
    message = forms.CharField(max_length=2000, widget=forms.TextInput)
    progress = forms.FloatField(required=False, min_value=0, max_value=100, label="Progress %")
    extra = JsonObjectField(required=False, label="Extra (JSON, optional)")


class CustomResponseForm(forms.Form):
    body = JsonObjectField(label="Response (JSON)")
    final = forms.BooleanField(required=False, initial=True, label="Final (closes the ticket)")
    comment = forms.CharField(required=False, max_length=2000, widget=forms.TextInput)


SCHEMA_FIELDS = {"string": forms.CharField, "number": forms.FloatField, "integer": forms.IntegerField}


def schema_supported(schema: Any) -> bool:
    """Flat object schemas with string/number/integer/boolean (or enum) properties become forms."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        return False
    props = schema["properties"]
    return bool(props) and all(
        isinstance(p, dict) and (p.get("enum") or p.get("type") in (*SCHEMA_FIELDS, "boolean")) for p in props.values()
    )


class SchemaResponseForm(forms.Form):
    """A form built from a request_input response schema; `payload()` is the object to send."""

    final = forms.BooleanField(required=False, initial=True, label="Final (closes the ticket)")
    comment = forms.CharField(required=False, max_length=2000, widget=forms.TextInput)

    def __init__(self, *args: Any, schema: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        required = set(schema.get("required") or [])
        self.schema_keys = list(schema["properties"])
        fields: dict[str, forms.Field] = {}
        for key, prop in schema["properties"].items():
            label = prop.get("title") or key.replace("_", " ").capitalize()
            opts = dict(label=label, required=key in required, help_text=prop.get("description", ""))
            if prop.get("enum"):
                choices = [(json.dumps(v), str(v)) for v in prop["enum"]]
                fields[f"s_{key}"] = forms.TypedChoiceField(
                    choices=[("", "—"), *choices], coerce=json.loads, empty_value=None, **opts
                )
            elif prop.get("type") == "boolean":
                fields[f"s_{key}"] = forms.BooleanField(**{**opts, "required": False})
            else:
                fields[f"s_{key}"] = SCHEMA_FIELDS[prop["type"]](**opts)
        self.fields = {**fields, **self.fields}

    def payload(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {k: data[f"s_{k}"] for k in self.schema_keys if data.get(f"s_{k}") not in (None, "")}


def response_form_for(ticket: PendingCall, data: Any = None) -> forms.Form:
    """The custom-response form of a ticket: built from its schema where it declares one."""
    schema = ticket.response_schema
    if schema is not None and schema_supported(schema):
        return SchemaResponseForm(data, schema=schema, prefix="custom")
    initial = {"body": json.dumps(example_body(ticket), indent=2)}
    return CustomResponseForm(data, initial=initial, prefix="custom")


def example_body(ticket: PendingCall) -> dict[str, Any]:
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        return {"confirmed": True}
    if ticket.kind == PendingCall.Kind.CHOICE:
        options = (ticket.args or {}).get("options") or [""]
        return {"result": options[0]}
    return {"status": "approved"}


def fits_schema(ticket: PendingCall, payload: dict[str, Any]) -> bool:
    """Whether a fixed payload (plain Approve/Reject) would pass the ticket's response schema."""
    schema = ticket.response_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return True
    import jsonschema

    try:
        jsonschema.validate(payload, schema)
    except jsonschema.ValidationError:
        return False
    except jsonschema.SchemaError:
        return True
    return True
