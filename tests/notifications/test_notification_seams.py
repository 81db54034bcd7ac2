"""Where notifications meet policies: webhooks never reach the server's own network unless allowed
(at registration: 400; at delivery: resolved again, sent to the address checked); a reminder or an
escalation whose ticket closed meanwhile, or for someone whose approval already counts, is not sent;
"only tickets of my groups" is honoured when the email is queued and when it goes out."""

from __future__ import annotations

import ipaddress
import json

import pytest
from django.core import mail
from django.utils import timezone

from approvals import services as approvals
from notifications import sending, services, webhook_urls
from notifications.admin import WebhookEndpointForm
from notifications.models import Delivery, NotificationEvent, NotificationPreference, WebhookEndpoint
from tests.approvals.policy_helpers import open_ticket

SECRET = "whsec-test-0123456789abcdef"
BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
PRIVATE = [
    "http://127.0.0.1:6379/",
    "http://localhost:8000/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.5/h",
    "http://192.168.1.20/h",
    "http://100.64.0.1/h",
    "http://[::1]:8080/h",
    "http://[::ffff:127.0.0.1]/h",
    "http://0.0.0.0/h",
]


def _post(client, body):
    return client.post("/api/webhooks", data=json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("url", PRIVATE)
def test_registering_a_webhook_to_a_private_address_is_refused(demo, client, settings, url):
    client.force_login(demo["admin"])
    r = _post(client, {"url": url, "events": ["ticket.opened"]})
    assert r.status_code == 400 and "loopback, private or link-local" in r.json()["detail"], r.content
    assert "ADKWEB_WEBHOOK_ALLOW_PRIVATE" in r.json()["detail"] and not WebhookEndpoint.objects.exists()
    form = WebhookEndpointForm(data={"name": "x", "url": url, "events": ["ticket.opened"], "format": "json"})
    assert not form.is_valid() and "loopback, private or link-local" in str(form.errors["url"])
    endpoint = _post(client, {"url": "https://hooks.example.com/a", "events": ["ticket.opened"]}).json()
    r = client.patch(f"/api/webhooks/{endpoint['id']}", data=json.dumps({"url": url}), content_type="application/json")
    assert r.status_code == 400 and WebhookEndpoint.objects.get().url == "https://hooks.example.com/a"
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = True  # an administrator's receiver on this host
    assert _post(client, {"url": url, "events": ["ticket.opened"]}).status_code == 201


def _deliver(event: NotificationEvent) -> list[Delivery]:
    for pk in services.event_fan_out(event_id=event.pk):
        sending.delivery_attempt(delivery_id=pk)
    return list(Delivery.objects.filter(event=event, channel="webhook").order_by("pk"))


def test_a_delivery_to_a_private_address_is_refused_again_when_it_goes_out(demo, webhook_receiver, settings):
    receiver = webhook_receiver(SECRET)
    WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET, events=["ticket.opened"])
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = False  # registered while allowed, or its name moved since
    (delivery,) = _deliver(NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket()))
    assert delivery.status == "skipped" and "127.0.0.1 is a loopback, private or link-local" in delivery.last_error
    assert receiver.hits == []


def test_a_name_is_resolved_at_delivery_and_the_post_goes_to_the_address_checked(
    demo, webhook_receiver, settings, monkeypatch
):
    receiver = webhook_receiver(SECRET)
    port = receiver.url.split(":")[2].split("/")[0]
    url = f"http://hooks.customer.test:{port}/hooks/adkweb"
    WebhookEndpoint.objects.create(url=url, secret=SECRET, events=["ticket.opened"])
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = False
    answers = {"hooks.customer.test": [ipaddress.ip_address("127.0.0.1")]}
    monkeypatch.setattr(webhook_urls, "resolve", lambda host, port: answers[host])
    (refused,) = _deliver(NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket()))
    assert refused.status == "skipped" and "hooks.customer.test resolves to 127.0.0.1" in refused.last_error
    # Public now (here the receiver stands in for it): the POST goes to that address, the name kept.
    monkeypatch.setattr(webhook_urls, "is_public", lambda ip: True)
    (sent,) = _deliver(NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket()))
    assert sent.status == "delivered" and len(receiver.hits) == 1 and receiver.hits[0].signature_ok
    assert receiver.hits[0].headers["Host"] == f"hooks.customer.test:{port}"


def test_a_name_with_several_addresses_is_tried_address_by_address_when_a_connection_fails(
    demo, webhook_receiver, settings, monkeypatch
):
    receiver = webhook_receiver(SECRET)
    port = receiver.url.split(":")[2].split("/")[0]
    WebhookEndpoint.objects.create(
        url=f"http://hooks.customer.test:{port}/hooks/adkweb", secret=SECRET, events=["ticket.opened"]
    )
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = False
    monkeypatch.setattr(webhook_urls, "is_public", lambda ip: True)  # the receiver stands in for a public host
    # The name's first address takes no connections (nothing listens on 127.0.0.2); its second is the receiver.
    answers = [ipaddress.ip_address("127.0.0.2"), ipaddress.ip_address("127.0.0.1")]
    monkeypatch.setattr(webhook_urls, "resolve", lambda host, port: answers)
    (sent,) = _deliver(NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket()))
    assert sent.status == "delivered" and len(receiver.hits) == 1 and receiver.hits[0].signature_ok
    assert receiver.hits[0].headers["Host"] == f"hooks.customer.test:{port}"
    # No address takes the connection: the delivery fails (to be retried) and says what was tried.
    answers[1:] = [ipaddress.ip_address("127.0.0.3")]
    (failed,) = _deliver(NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket()))
    assert failed.status != "delivered" and len(receiver.hits) == 1
    assert failed.last_error.startswith("Could not connect: 127.0.0.2: ConnectError")
    assert "127.0.0.3: ConnectError" in failed.last_error


def test_no_stale_reminder_for_a_ticket_closed_another_way(emails, webhook_receiver):
    receiver = webhook_receiver(SECRET)
    WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET, events=["ticket.reminder", "ticket.escalated"])
    call = open_ticket(args=BIG)
    reminder = NotificationEvent.objects.create(name="ticket.reminder", ticket=call)
    escalated = NotificationEvent.objects.create(name="ticket.escalated", ticket=call)
    assert services.event_fan_out(event_id=reminder.pk) and services.event_fan_out(event_id=escalated.pk)
    call.status, call.closed_at = "cancelled", timezone.now()  # the agent's run was aborted meanwhile
    call.save()
    for delivery in Delivery.objects.all():
        sending.delivery_attempt(delivery_id=delivery.pk)
    rows = list(Delivery.objects.values_list("channel", "status", "last_error"))
    assert {c for c, _, _ in rows} == {"email", "webhook"} and all(s == "skipped" for _, s, _ in rows), rows
    assert all("cancelled before" in e for _, _, e in rows), rows
    assert mail.outbox == [] and receiver.hits == []


def test_no_opening_webhook_for_a_ticket_decided_before_it_went_out(emails, webhook_receiver):
    """A ticket.opened webhook fanned out while its ticket was open, sent after it was decided (the endpoint
    was down at its first attempt, or the task waited): before, it went out, "Approval needed" for a ticket
    already approved; now it is skipped, saying why, as a reminder is. Its decision has its own webhook."""
    receiver = webhook_receiver(SECRET)
    WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET, events=["ticket.opened"])
    call = open_ticket()
    opened = NotificationEvent.objects.create(name="ticket.opened", ticket=call)
    services.event_fan_out(event_id=opened.pk)
    approvals.ticket_approve(ticket=call, actor=emails["approver"])
    for delivery in Delivery.objects.filter(event=opened, channel="webhook"):
        sending.delivery_attempt(delivery_id=delivery.pk)
    post = Delivery.objects.get(event=opened, channel="webhook")
    assert (post.status, post.last_error) == ("skipped", "The ticket was approved before this ticket.opened went out.")
    assert receiver.hits == []


def test_no_reminder_to_an_approver_whose_approval_already_counts(emails):
    call = open_ticket(args=BIG)
    event = NotificationEvent.objects.create(name="ticket.reminder", ticket=call)
    services.event_fan_out(event_id=event.pk)
    assert set(Delivery.objects.values_list("recipient__username", flat=True)) >= {"approver", "approver2"}
    approvals.ticket_approve(ticket=call, actor=emails["approver"])  # 1 of 2, after the reminder was queued
    for delivery in Delivery.objects.filter(event=event):
        sending.delivery_attempt(delivery_id=delivery.pk)
    to_approver = Delivery.objects.get(event=event, recipient=emails["approver"])
    assert to_approver.status == "skipped" and "your approval already counts (1 of 2)" in to_approver.last_error
    assert Delivery.objects.get(event=event, recipient=emails["approver2"]).status == "delivered"
    assert sorted(m.to[0] for m in mail.outbox) == ["admin@example.com", "approver2@example.com"]  # admin: superuser


def test_only_tickets_of_my_groups_is_honoured_when_queued_and_when_sent(emails):
    # admin: a superuser (decides everything) in the approvers role, not in finance; approver: in finance.
    prefs = NotificationPreference.objects.create(user=emails["admin"], only_my_groups=True)
    NotificationPreference.objects.create(user=emails["approver"], only_my_groups=True)
    first = NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket(args=BIG))
    services.event_fan_out(event_id=first.pk)
    assert sorted(Delivery.objects.values_list("recipient__username", flat=True)) == ["approver", "approver2"]
    prefs.only_my_groups = False
    prefs.save()
    second = NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket(args=BIG))
    services.event_fan_out(event_id=second.pk)
    queued = Delivery.objects.get(event=second, recipient=emails["admin"])
    prefs.only_my_groups = True  # changed while the email waited (a retry can come hours later)
    prefs.save()
    sending.delivery_attempt(delivery_id=queued.pk)
    queued.refresh_from_db()
    assert queued.status == "skipped" and "tickets of their groups only" in queued.last_error
    NotificationPreference.objects.filter(user=emails["approver"]).update(email_enabled=False)
    to_approver = Delivery.objects.get(event=second, recipient=emails["approver"])
    sending.delivery_attempt(delivery_id=to_approver.pk)
    to_approver.refresh_from_db()
    assert to_approver.status == "skipped" and to_approver.last_error == "The person turned ticket emails off."
    assert "admin@example.com" not in {m.to[0] for m in mail.outbox}


@pytest.mark.parametrize("allow_private", [True, False])
def test_an_endpoint_stored_with_a_port_no_connection_has_is_skipped_not_retried(demo, settings, allow_private):
    """An endpoint stored before registration refused such ports (port 99999, or 0) can never be
    reached: its delivery is skipped with why, once, not failed and retried like a network error."""
    WebhookEndpoint.objects.create(url="http://127.0.0.1:99999/hooks", secret=SECRET, events=["ticket.opened"])
    settings.ADKWEB_WEBHOOK_ALLOW_PRIVATE = allow_private
    (delivery,) = _deliver(NotificationEvent.objects.create(name="ticket.opened", ticket=open_ticket()))
    assert delivery.status == "skipped", (delivery.status, delivery.last_error)
    assert "a port goes from 1 to 65535" in delivery.last_error
    assert delivery.next_attempt_at is None
