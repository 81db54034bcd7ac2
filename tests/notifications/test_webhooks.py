"""Webhooks against a real local HTTP receiver that checks the HMAC: retries with backoff until it
accepts, each attempt kept on the delivery row; the Slack format; timeouts; events subscribed."""

from __future__ import annotations

import hashlib
import hmac
import json

from agents_app import services as agent_services
from approvals import services as approvals
from notifications.models import Delivery, WebhookEndpoint
from notifications.webhooks import sign
from tests.approvals_factories import ticket

SECRET = "whsec-test-0123456789abcdef"


def endpoint_for(receiver, **fields) -> WebhookEndpoint:
    defaults = dict(url=receiver.url, secret=receiver.secret, events=["ticket.opened", "ticket.decided"])
    return WebhookEndpoint.objects.create(**{**defaults, **fields})


def test_signature_is_hmac_sha256_of_the_exact_body():
    body = b'{"id":"x","event":"ticket.opened"}'
    expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert sign(SECRET, body) == f"sha256={expected}"
    assert sign(SECRET, body + b" ") != sign(SECRET, body)


def test_receiver_fails_twice_then_the_third_delivery_succeeds(demo, worker, webhook_receiver, fast_retries, wait):
    receiver = webhook_receiver(SECRET, fail_first=2)
    endpoint_for(receiver)
    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    agent_services.message_send(session=session, text="Please reimburse 200$ for meals", streaming=False)

    hits = receiver.wait_for(3)
    assert [h.status for h in hits] == [503, 503, 204] and all(h.signature_ok for h in hits)
    bodies = [h.json for h in hits]
    assert bodies[0] == bodies[1] == bodies[2], "every retry sends the same body"
    assert (
        len({h.headers["X-Adkweb-Delivery"] for h in hits}) == 1
        and bodies[0]["id"] == hits[0].headers["X-Adkweb-Delivery"]
    )
    body = bodies[0]
    assert body["event"] == "ticket.opened" and hits[0].headers["X-Adkweb-Event"] == "ticket.opened"
    assert body["ticket"]["tool"] == "ask_for_approval" and body["ticket"]["summary"] == "meals · $200.00"
    assert body["ticket"]["args"] == {"purpose": "meals", "amount": 200.0} and body["ticket"]["status"] == "pending"
    assert body["ticket"]["url"].endswith(f"/tickets/{body['ticket']['id']}/")

    delivery = wait(lambda: Delivery.objects.filter(channel="webhook", status="delivered").first(), what="delivered")
    assert str(delivery.uuid) == body["id"] and delivery.attempts == 3 and delivery.delivered_at
    log = list(delivery.attempt_log.values_list("number", "ok", "status_code"))
    assert log == [(1, False, 503), (2, False, 503), (3, True, 204)]
    assert "HTTP 503: temporarily unavailable" in delivery.attempt_log.get(number=1).error
    assert receiver.wait_for(3) and len(receiver.hits) == 3, "nothing more after the success"


def test_a_wrong_secret_is_refused_by_the_receiver_and_the_delivery_gives_up_after_its_tries(
    demo, worker, webhook_receiver, fast_retries, wait
):
    receiver = webhook_receiver(SECRET)
    endpoint_for(receiver, secret="not-the-receivers-secret")
    call = ticket()
    approvals.ticket_approve(ticket=call, actor=demo["approver"])  # ticket.decided, after commit

    hits = receiver.wait_for(6, timeout=20)
    assert all(not h.signature_ok and h.status == 401 for h in hits)
    delivery = wait(lambda: Delivery.objects.filter(channel="webhook", status="failed").first(), what="failure")
    assert delivery.attempts == 6 and delivery.attempt_log.count() == 6 and delivery.last_status_code == 401
    assert json.loads(hits[0].body)["event"] == "ticket.decided"
    assert json.loads(hits[0].body)["data"] == {"status": "approved", "by": "approver", "comment": ""}


def test_a_slow_receiver_times_out_and_is_retried(demo, worker, webhook_receiver, fast_retries, settings, wait):
    settings.ADKWEB_WEBHOOK_TIMEOUT = 0.3
    receiver = webhook_receiver(SECRET, sleep=1.0)
    endpoint_for(receiver)
    approvals.ticket_approve(ticket=ticket(), actor=demo["approver"])
    delivery = wait(lambda: Delivery.objects.filter(channel="webhook", attempts__gte=2).first(), what="a retry")
    assert delivery.attempt_log.get(number=1).error == "Timed out after 0.3 s."
    assert delivery.status in ("retrying", "sending", "failed")


def test_slack_format_is_text_plus_blocks(demo, worker, webhook_receiver, fast_retries):
    receiver = webhook_receiver(SECRET)
    endpoint_for(receiver, format="slack")
    call = ticket(args={"purpose": "<!channel> *party*", "amount": 200.0})
    approvals.ticket_approve(ticket=call, actor=demo["approver"])
    body = receiver.wait_for(1)[0].json
    assert set(body) == {"text", "blocks"}
    assert body["text"].startswith(f"Ticket decided: #{call.pk} ask_for_approval (reimbursement_agent)")
    assert "&lt;!channel&gt;" in body["text"] and "<!channel>" not in json.dumps(body), "model text is escaped"
    assert [b["type"] for b in body["blocks"]] == ["section", "section", "context"]
    assert f"/tickets/{call.pk}/|" in body["blocks"][0]["text"]["text"]


def test_only_subscribed_enabled_endpoints_get_an_event(demo, worker, webhook_receiver, fast_retries, wait):
    opened_only = webhook_receiver(SECRET)
    endpoint_for(opened_only, events=["ticket.opened"])
    disabled = webhook_receiver(SECRET)
    endpoint_for(disabled, events=["ticket.decided"], enabled=False)
    decided = webhook_receiver(SECRET)
    endpoint_for(decided, events=["ticket.decided"])
    approvals.ticket_approve(ticket=ticket(), actor=demo["approver"])
    decided.wait_for(1)
    hooks = Delivery.objects.filter(channel="webhook")
    wait(lambda: hooks.filter(status="delivered").count() == 1, what="the delivery")
    assert opened_only.hits == [] and disabled.hits == []
    assert hooks.count() == 1


def test_a_failed_turn_is_a_turn_failed_event(demo, worker, webhook_receiver, fast_retries):
    from agents_app.models import AgentConfig

    receiver = webhook_receiver(SECRET)
    endpoint_for(receiver, events=["turn.failed"])
    session = agent_services.session_create(app_name="stock_agent", user_id="requester")
    AgentConfig.objects.filter(name="stock_agent").update(enabled=False)  # the turn cannot run: it fails
    agent_services.message_send(session=session, text="What is GOOG at?", streaming=False)
    body = receiver.wait_for(1)[0].json
    assert body["event"] == "turn.failed" and body["turn"]["status"] == "failed"
    assert body["turn"]["agent"] == "stock_agent" and body["turn"]["error"]
    assert body["turn"]["conversation_url"].endswith(f"/sessions/{session.pk}/")
