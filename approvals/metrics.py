"""The human side's Prometheus metrics (registered with adkweb.metrics in ApprovalsConfig.ready):
tickets by status, the open ones and the age of the oldest, and decisions by outcome."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .models import PendingCall, Response


def ticket_metrics() -> Iterable[Metric]:
    counts = dict(PendingCall.objects.order_by().values_list("status").annotate(n=Count("id")))
    tickets = GaugeMetricFamily("adkweb_tickets", "Tickets by status.", labels=["status"])
    for status in PendingCall.Status.values:
        tickets.add_metric([status], counts.get(status, 0))

    open_ = PendingCall.objects.filter(status__in=PendingCall.OPEN_STATUSES).aggregate(
        n=Count("id"), at=Min("created_at")
    )
    opened = GaugeMetricFamily("adkweb_tickets_open", "Tickets waiting for a decision.", value=open_["n"])
    oldest = GaugeMetricFamily(
        "adkweb_ticket_oldest_open_age_seconds",
        "How long the oldest open ticket has waited (0: none open).",
        value=max(0.0, (timezone.now() - open_["at"]).total_seconds()) if open_["at"] else 0.0,
    )

    decisions = CounterMetricFamily(
        "adkweb_decisions",
        "Responses recorded on tickets, by outcome (approve, reject, custom, update, expire) and by whom "
        "(a person, a policy, a standing grant, the due date).",
        labels=["outcome", "by"],
    )
    for outcome, by, n in Response.objects.order_by().values_list("action", "source").annotate(n=Count("id")):
        decisions.add_metric([outcome, by], n)
    return [tickets, opened, oldest, decisions]
