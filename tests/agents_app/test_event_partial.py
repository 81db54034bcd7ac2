"""The shared event partial: readable messages, tool cards, ticket links, errors, escaping."""

from __future__ import annotations

from django.template.loader import render_to_string
from google.adk.events.event import Event
from google.genai import types

from agents_app import selectors, services, timeline
from agents_app.models import StoredEvent
from agents_app.session_service import event_to_json
from approvals.models import PendingCall


def _store(session, event: Event) -> StoredEvent:
    return StoredEvent.objects.create(
        session=session, event_id=event.id, author=event.author, timestamp=event.timestamp, data=event_to_json(event)
    )


def _render(event, **ctx) -> str:
    return render_to_string("agents_app/partials/event.html", {"event": event, **ctx})


def test_user_and_agent_text_are_escaped_and_keep_the_event_dom_id(demo):
    session = services.session_create(app_name="summary_agent", user_id="requester")
    ev = Event(
        author="summary_agent", content=types.Content(role="model", parts=[types.Part(text="<script>x</script> hi")])
    )
    html = _render(_store(session, ev))
    assert f'id="event-{ev.id}"' in html
    assert "&lt;script&gt;x&lt;/script&gt; hi" in html and "<script>x" not in html
    assert "summary_agent" in html


def test_long_running_call_links_to_its_ticket_and_response_is_a_card(demo):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    call = types.FunctionCall(id="call-1", name="ask_for_approval", args={"purpose": "meals", "amount": 200.0})
    ev = Event(
        author="reimbursement_agent",
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        long_running_tool_ids={"call-1"},
    )
    stored = _store(session, ev)
    ticket = PendingCall.objects.create(
        session=session,
        app_name=session.app_name,
        requester="requester",
        kind="long_running",
        call_id="call-1",
        call_name="ask_for_approval",
    )
    html = _render(stored)
    assert "Waits for a human" in html and "ask_for_approval" in html
    assert "purpose: meals · amount: $200.00" in html
    assert f'href="/tickets/{ticket.pk}/"' in html and f'id="conv-ticket-{ticket.pk}"' in html
    resp = Event(
        author="reimbursement_agent",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="ask_for_approval", response={"status": "pending"}
                    )
                )
            ],
        ),
    )
    html = _render(_store(session, resp))
    assert "Result of" in html and "status: pending" in html and "<details>" in html


def test_error_event_and_failed_turn_are_shown_plainly(demo):
    session = services.session_create(app_name="summary_agent", user_id="requester")
    ev = Event(author="summary_agent", error_code="MALFORMED", error_message="The model <broke>.")
    html = _render(_store(session, ev))
    assert "MALFORMED" in html and "The model &lt;broke&gt;." in html
    turn = services.message_send(session=session, text="hi", streaming=False)
    turn.status, turn.error = "failed", "ValueError: boom"
    turn.save()
    timeline = selectors.session_timeline(session)
    html = _render(timeline[-1])
    assert "Turn failed" in html and "ValueError: boom" in html and f'id="turn-{turn.pk}-error"' in html


def test_streaming_view_has_the_same_dom_id_as_the_final_event():
    view = timeline.streaming_view(event_id="abc-1", author="a", text="Hel")
    html = _render(view, oob="true")
    assert 'id="event-abc-1"' in html and 'id="event-abc-1-stream"' in html and 'hx-swap-oob="true"' in html
