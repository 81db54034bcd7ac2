"""Forms of the approvals pages: inbox filters and the four ticket actions."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from adkweb.storable import TOO_DEEP, unstorable

from .edits import Param
from .grants import GrantSpec
from .models import PendingCall
from .selectors import SEARCH_MAX, SORTS, InboxFilters

STATUS_CHOICES = [("open", "open"), *PendingCall.Status.choices, ("closed", "closed (any)"), ("all", "all")]
SORT_CHOICES = [(sort, f"{sort} first") for sort in SORTS]


class InboxFilterForm(forms.Form):
    agent = forms.CharField(required=False, max_length=128)
    tool = forms.CharField(required=False, max_length=128)
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    kind = forms.ChoiceField(required=False, choices=[("", "any kind"), *PendingCall.Kind.choices])
    mine = forms.BooleanField(required=False)
    q = forms.CharField(required=False, max_length=SEARCH_MAX, label="Search")
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES)
    page = forms.IntegerField(required=False, min_value=1, max_value=10_000_000)
    after = forms.CharField(required=False, max_length=64)  # keyset cursors of the pager's links
    before = forms.CharField(required=False, max_length=64)

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
            after=data.get("after") or "",
            before=data.get("before") or "",
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
        raise forms.ValidationError(f"{label} contains {TOO_DEEP}, which cannot be stored.") from exc
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


class _Decision(forms.Form):
    """Every decision carries the hash of the arguments its decider saw (a changed ticket: 409)."""

    args_hash = forms.CharField(required=False, max_length=64, min_length=64, widget=forms.HiddenInput)


GRANT_UNITS = {"minutes": 1, "hours": 60}


class ApproveForm(_Decision):
    """Approve, optionally with edited arguments (fields from the tool's declaration) and a standing
    grant ("also allow this tool for this conversation / this user for N minutes or hours")."""

    comment = forms.CharField(required=False, max_length=2000, widget=forms.TextInput)
    payload = JsonObjectField(required=False, label="Payload (JSON, optional)")
    grant_scope = forms.ChoiceField(
        required=False,
        choices=[("", "no"), ("session", "this conversation"), ("user", "this user")],
        label="Also allow this tool for",
    )
    grant_for = forms.IntegerField(required=False, min_value=1, max_value=720, initial=1, label="for")
    grant_unit = forms.ChoiceField(required=False, choices=[(u, u) for u in GRANT_UNITS], initial="hours", label="")

    def __init__(self, *args: Any, params: list[Param] | None = None, current: dict | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.params = params or []
        self.current = current or {}
        for p in self.params:
            self.fields[f"e_{p.name}"] = _param_field(p, self.current.get(p.name))

    @property
    def edit_fields(self) -> list[forms.BoundField]:
        return [self[f"e_{p.name}"] for p in self.params]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("grant_scope") and not data.get("grant_for"):
            self.add_error("grant_for", "Say for how long.")
        return data

    def edited_args(self) -> dict[str, Any] | None:
        """The arguments as edited, or None when the approver changed nothing."""
        if not self.params or not any(self.add_prefix(f"e_{p.name}") in self.data for p in self.params):
            return None  # the form was sent without its edit fields (an API-like post): no edit
        edited = {}
        for p in self.params:
            value = self.cleaned_data.get(f"e_{p.name}")
            if p.type == "number" and isinstance(value, float) and value.is_integer():
                value = int(value)
            if value not in (None, "") or p.type == "boolean":
                edited[p.name] = value
        return None if edited == self.current else edited

    def grant(self) -> GrantSpec | None:
        scope = self.cleaned_data.get("grant_scope")
        if not scope:
            return None
        return GrantSpec(
            scope, self.cleaned_data["grant_for"] * GRANT_UNITS[self.cleaned_data.get("grant_unit") or "hours"]
        )


def _param_field(p: Param, value: Any) -> forms.Field:
    # Not required here: a required argument left empty is refused by the service (edits.check).
    opts: dict[str, Any] = dict(label=p.title or p.name, required=False, initial=value, help_text=p.description)
    if p.enum:
        by_text = {str(v): v for v in p.enum}
        return forms.TypedChoiceField(choices=[(k, k) for k in by_text], coerce=by_text.__getitem__, **opts)
    if p.type == "boolean":
        return forms.BooleanField(**{**opts, "required": False})
    if p.type == "integer":
        return forms.IntegerField(**opts)
    if p.type == "number":
        return forms.FloatField(**opts)
    return forms.CharField(max_length=2000, **opts)


class RejectForm(_Decision):
    reason = forms.CharField(max_length=2000, widget=forms.TextInput, help_text="The agent receives this reason.")


class UpdateForm(_Decision):
    message = forms.CharField(max_length=2000, widget=forms.TextInput)
    progress = forms.FloatField(required=False, min_value=0, max_value=100, label="Progress %")
    extra = JsonObjectField(required=False, label="Extra (JSON, optional)")


class CustomResponseForm(_Decision):
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


class SchemaResponseForm(_Decision):
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
    seen = {"args_hash": ticket.args_hash}  # what the decider saw, as the other forms carry it
    if schema is not None and schema_supported(schema):
        return SchemaResponseForm(data, schema=schema, prefix="custom", initial=seen)
    initial = {"body": json.dumps(example_body(ticket), indent=2), **seen}
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
