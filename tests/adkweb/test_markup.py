"""The inbox's and the conversation list's rows, written in Python (adkweb.markup), are the markup
their templates wrote, byte for byte: every branch of the row, hostile text escaped, in two time
zones. The templates below are the rows as they were before issue 12's target 4 (kept here as the
reference), with the inbox row's mark of an approver's edit since and the relative times' data-rel (static/js/reltime.js keeps
them true)."""

from __future__ import annotations

# ruff: noqa: E501  (the reference templates are the rows as they were written, one line each)
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django import forms
from django.forms.renderers import DjangoTemplates
from django.template import Context, Template
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy

from adkweb import markup
from agents_app import services as agent_services
from agents_app.models import AdkSession
from agents_app.rows import session_row
from approvals.models import PendingCall, Response
from approvals.rows import inbox_row
from tests.approvals_factories import session_for, ticket

INBOX_ROW = Template(
    "{% load approvals_tags %}"
    + """
<tr id="pending-call-{{ ticket.pk }}" class="row-{{ ticket.status }}{% if not ticket.is_open %} closed{% endif %}"{% if oob %} hx-swap-oob="{{ oob }}"{% endif %}>
  <td class="sel"><input type="checkbox" name="ticket" value="{{ ticket.pk }}" form="bulk-form" aria-label="Select ticket #{{ ticket.pk }}"{% if not ticket.is_open %} disabled{% endif %}></td>
  {% url 'approvals:ticket' ticket.pk as ticket_url %}<td data-label="#"><a href="{{ ticket_url }}">#{{ ticket.pk }}</a></td>
  <td data-label="Agent">{{ ticket.app_name }}</td>
  <td data-label="Tool"><code>{{ ticket|tool_label }}</code></td>
  <td data-label="Arguments"><a class="summary" href="{{ ticket_url }}">{{ ticket|args_summary|default:"(no arguments)" }}</a>{% with note=ticket|edit_note:120 %}{% if note %} <small class="edited">{{ note }}</small>{% endif %}{% endwith %}</td>
  <td data-label="Requester">{{ ticket.requester }}</td>
  <td data-label="Age"><time datetime="{{ ticket.created_at|date:'c' }}" title="{{ ticket.created_at }}" data-rel="since">{{ ticket.created_at|timesince }}</time></td>
  <td data-label="Status"><span class="chip st-{{ ticket.status }}">{{ ticket.get_status_display }}</span>{% if ticket.required_approvals > 1 and ticket.is_open %} <span class="quorum">{{ ticket|approval_count }} of {{ ticket.required_approvals }} approvals</span>{% endif %}{% if ticket.due_at and ticket.is_open %} <span class="muted due">due in <time datetime="{{ ticket.due_at|date:'c' }}" title="{{ ticket.due_at }}" data-rel="until">{{ ticket.due_at|timeuntil }}</time></span>{% endif %}{% if ticket.closed_by %} <span class="muted">by {{ ticket.closed_by.get_username }}</span>{% elif ticket.assigned_to %} <span class="muted">· {{ ticket.assigned_to.get_username }}</span>{% endif %}</td>
</tr>
"""
)
SESSION_ROW = Template(
    "{% load conversation_tags %}"
    + """
<tr id="session-row-{{ s.pk }}"{% if oob %} hx-swap-oob="{{ oob }}"{% endif %}>
  <td data-label="Agent"><a href="{% url 'agents_app:session-detail' s.pk %}">{{ s.app_name }}</a></td>
  <td data-label="User">{{ s.user_id }}</td>
  <td data-label="Status"><span class="chip act-{{ s.status }}">{{ s.status|status_label }}</span></td>
  <td data-label="Last activity">{% with when=s.update_time|epoch %}<time datetime="{{ when|date:'c' }}" title="{{ when|date:'Y-m-d H:i:s T' }}" data-rel="ago">{{ when|timesince }} ago</time>{% endwith %}</td>
  <td data-label="Session" class="muted"><code>{{ s.session_id|truncatechars:13 }}</code></td>
</tr>
"""
)
HOSTILE = "<script>alert(1)</script> & \"quotes\" 'x'"


def _template_row(t: PendingCall, oob: str = "") -> str:
    return INBOX_ROW.render(Context({"ticket": t, "oob": oob}))


def _reloaded(t: PendingCall) -> PendingCall:
    return PendingCall.objects.select_related("closed_by", "assigned_to", "edited_by").get(pk=t.pk)


@pytest.fixture
def tickets(demo) -> list[PendingCall]:
    s = session_for(user_id=HOSTILE, app_name="reimbursement_agent")
    out = [
        ticket(session=s),  # open, plain
        ticket(session=s, args={"purpose": HOSTILE, "amount": 1234.5}, app_name=HOSTILE),
        ticket(session=s, args={}, status="approved", closed_by=demo["approver"]),
        ticket(session=s, status="in_progress", assigned_to=demo["admin"]),
        ticket(session=s, required_approvals=2, due_at=timezone.now() + timedelta(hours=5)),
        ticket(session=s, kind="confirmation"),
        ticket(session=s, kind="input"),
        ticket(session=s, status="rejected", closed_by=demo["approver"], assigned_to=demo["admin"]),
        # Edited by an approver: the edited arguments, marked (who, what changed), a long edit cut.
        ticket(session=s, edited_args={"purpose": HOSTILE * 9, "amount": 150.0}, edited_by=demo["approver2"]),
        ticket(session=s, kind="confirmation", edited_args={"amount": 5.0, "recipient": HOSTILE}),
    ]
    Response.objects.create(
        pending_call=out[4], action="approve", payload={}, final=False, actor=demo["admin"], args_hash=out[4].args_hash
    )
    return [_reloaded(t) for t in out]


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_inbox_rows_are_the_template_rows_byte_for_byte(tickets, zone):
    with timezone.override(zone):
        for t in tickets:
            for oob in ("", "outerHTML"):
                assert str(inbox_row(t, oob)) == _template_row(t, oob).strip("\n"), (t.pk, oob)


def test_inbox_rows_escape_what_agents_and_people_wrote(tickets):
    html = str(inbox_row(tickets[1]))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&quot;quotes&quot;" in html and "&#x27;x&#x27;" in html


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_conversation_rows_are_the_template_rows_byte_for_byte(demo, zone):
    rows = [
        agent_services.session_create(app_name="reimbursement_agent", user_id="requester"),
        agent_services.session_create(app_name="stock_agent", user_id=HOSTILE, session_id="<b>a-very-long-session-id"),
    ]
    AdkSession.objects.filter(pk=rows[1].pk).update(app_name=HOSTILE)
    with timezone.override(zone):
        for s in AdkSession.objects.filter(pk__in=[r.pk for r in rows]):
            for oob in ("", "true"):
                expected = SESSION_ROW.render(Context({"s": s, "oob": oob})).strip("\n")
                assert str(session_row(s, oob)) == expected, (s.pk, oob)
    html = str(session_row(AdkSession.objects.get(pk=rows[1].pk)))
    assert "<script>" not in html and "&lt;b" in html


# -- the helpers' fast paths are Django's output ---------------------------------------------------
_INSTANTS = [
    datetime(2026, 12, 1, 7, 31, 19, 123456, tzinfo=UTC),
    datetime(2026, 1, 5, 0, 0, 0, tzinfo=UTC),
    datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
    datetime(2026, 11, 1, 5, 30, tzinfo=UTC),  # 01:30 EDT in New York: an ambiguous local time
    datetime(2026, 11, 1, 6, 30, tzinfo=UTC),  # 01:30 EST, its second occurrence
    datetime(2026, 3, 8, 7, 30, tzinfo=UTC),  # 03:30 EDT, just after the spring gap
    datetime(2026, 6, 1, 12, 0, tzinfo=ZoneInfo("Asia/Kolkata")),  # aware in a zone of its own
]


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"])
@pytest.mark.parametrize("fmt", ["c", "Y-m-d H:i:s T", "Y-m-d", "N j, Y, P"])
def test_date_is_the_date_filter(zone, fmt):
    template = Template("{{ when|date:fmt }}")
    with timezone.override(zone):
        for when in [*_INSTANTS, None, ""]:
            assert markup.date(when, fmt) == template.render(Context({"when": when, "fmt": fmt})), (when, fmt)


@pytest.mark.parametrize("thousands", [False, True])
def test_value_is_the_template_variable(settings, thousands):
    settings.USE_THOUSAND_SEPARATOR = thousands
    template = Template("{{ v }}")
    for v in [0, 7, -12, 1234567, HOSTILE, "", "plain", "a & b", 1234.5, True, None, _INSTANTS[0]]:
        assert markup.value(v) == template.render(Context({"v": v})), v


_CHOICES = [
    ("", "any"),
    ("open", "Open"),
    (HOSTILE, HOSTILE),
    (7, "seven"),
    ("lazy", gettext_lazy("Yes")),
    ("safe", mark_safe("<b>safe</b>")),
    ("Group <1>", [("g1", "in a group"), ("g2", HOSTILE)]),
    ("last", "Last"),
]
_WIDGETS = [
    forms.TextInput(),
    forms.TextInput(attrs={"placeholder": HOSTILE, "maxlength": 40, "data-safe": mark_safe("<i>")}),
    forms.HiddenInput(),
    forms.NumberInput(attrs={"min": 0, "step": "any"}),
    forms.EmailInput(),
    forms.URLInput(),
    forms.PasswordInput(render_value=True),
    forms.DateInput(),
    forms.DateTimeInput(),
    forms.CheckboxInput(),
    forms.Textarea(),
    forms.Textarea(attrs={"rows": 5, "spellcheck": "false", "class": "mono"}),
    forms.Select(choices=_CHOICES),
    forms.NullBooleanSelect(),
]
_VALUES = [None, "", "open", HOSTILE, mark_safe("<b>safe</b>"), 7, 0, 1234.5, True, False, "g2", "\nline\n", ("a", 1)]


@pytest.mark.parametrize("widget", _WIDGETS, ids=lambda w: type(w).__name__)
@pytest.mark.parametrize("attrs", [None, {"id": "id_f"}, {"id": HOSTILE, "data-x": True, "hidden": False}])
def test_the_form_renderer_writes_djangos_widgets_byte_for_byte(widget, attrs):
    ours, djangos = markup.FormRenderer(), DjangoTemplates()
    for val in _VALUES:
        expected = widget.render("f<", val, attrs, djangos)
        assert widget.render("f<", val, attrs, ours) == expected, val
        assert "<script>" not in expected


def test_other_templates_render_as_before():
    """Radio buttons, a select whose options have a template of their own, error lists: the templates."""

    class OwnOption(forms.Select):
        option_template_name = "django/forms/widgets/radio_option.html"

    ours, djangos = markup.FormRenderer(), DjangoTemplates()
    for widget in (forms.RadioSelect(choices=_CHOICES), OwnOption(choices=_CHOICES), forms.ClearableFileInput()):
        assert widget.render("f", "open", {"id": "x"}, ours) == widget.render("f", "open", {"id": "x"}, djangos)
    errors = forms.utils.ErrorList([HOSTILE], renderer=ours)
    assert str(errors) == str(forms.utils.ErrorList([HOSTILE], renderer=djangos))


def test_the_pages_forms_are_djangos(demo, settings):
    """The inbox's and the conversation list's filter forms and the ticket page's decision forms,
    bound to what a person may send (errors included), with the settings' renderer."""
    from django.forms.renderers import get_default_renderer

    from agents_app.forms import SessionFilterForm
    from approvals.forms import ApproveForm, InboxFilterForm, RejectForm, UpdateForm

    assert type(get_default_renderer()) is markup.FormRenderer
    for data in [{}, {"status": "closed", "kind": "input", "sort": "oldest", "q": HOSTILE}, {"status": HOSTILE}]:
        for form in (
            InboxFilterForm(data),
            SessionFilterForm(data, agents=["a", HOSTILE]),
            RejectForm(data, prefix="reject"),
            UpdateForm(data, prefix="update", initial={"args_hash": HOSTILE}),
            ApproveForm(data, prefix="approve"),
        ):
            for field in form:
                ours = str(field)
                form.renderer = DjangoTemplates()
                assert ours == str(field), (data, field.name)
                form.renderer = markup.FormRenderer()


def test_url_for_pk_is_reverse():
    """Rows' links, reversed once per process and script prefix: the URLs reverse() gives, under
    another script prefix too; what is not an integer pk is reversed as usual."""
    from django.urls import NoReverseMatch, get_script_prefix, reverse, set_script_prefix

    names = ["approvals:ticket", "agents_app:session-detail"]
    before = get_script_prefix()
    try:
        for prefix in ["/", "/sub path/", "/ünï/"]:
            set_script_prefix(prefix)
            for name in names:
                for pk in [0, 1, 7, 123456789, 730_155_500_000_041]:
                    assert markup.url_for_pk(name, pk) == reverse(name, args=[pk]), (prefix, name, pk)
                assert markup.url_for_pk(name, "12") == reverse(name, args=["12"])
                with pytest.raises(NoReverseMatch):
                    markup.url_for_pk(name, -1)
    finally:
        set_script_prefix(before)


def test_a_localized_instant_is_the_template_variable_in_each_language_and_zone(settings):
    """value() keeps an instant's localized text per process: keyed by language and time zone, so
    each reads its own (asked in turns, so a cached text would show in the wrong one)."""
    from django.utils import translation

    template = Template("{{ v }}")
    for _ in range(2):
        for language in ["en", "de", "fr"]:
            for zone in ["UTC", "America/New_York", "Asia/Kolkata"]:
                with translation.override(language), timezone.override(zone):
                    for when in _INSTANTS:
                        assert markup.value(when) == template.render(Context({"v": when})), (language, zone, when)
    settings.USE_TZ = False  # naive rendering: the cached texts are not used
    with timezone.override("Asia/Kolkata"):
        assert markup.value(_INSTANTS[0]) == template.render(Context({"v": _INSTANTS[0]}))
