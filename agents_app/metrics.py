"""The agent side's Prometheus metrics (registered with adkweb.metrics in AgentsAppConfig.ready): turns
by status, how long the turns that finished lately took, and the age of the oldest turn waiting for a
worker. Read from the database, so they count every worker's turns.

The durations cover the turns that finished within ADKWEB_METRICS_TURN_WINDOW_SECONDS (an hour by
default): a range of the turn_finished_at index, whose cost follows the recent load rather than the
number of turns ever run (a scrape every few seconds read them all). Being a window, its buckets go
down as well as up: read them as they are (`histogram_quantile(0.95, adkweb_turn_duration_seconds_bucket)`),
not through rate()."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, Q, QuerySet, Sum
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from .models import Turn

# Seconds: a turn is a few model and tool calls; the soft time limit is 600 s by default.
DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def turn_metrics() -> Iterable[Metric]:
    counts = dict(Turn.objects.order_by().values_list("status").annotate(n=Count("id")))
    turns = GaugeMetricFamily(
        "adkweb_turns",
        "Turns by status: queued and running are the work in progress, done and failed every turn so far.",
        labels=["status"],
    )
    for status in Turn.Status.values:
        turns.add_metric([status], counts.get(status, 0))

    oldest = Turn.objects.filter(status=Turn.Status.QUEUED).aggregate(at=Min("created_at"))["at"]
    waiting = GaugeMetricFamily(
        "adkweb_turn_queue_oldest_age_seconds",
        "How long the oldest queued turn has waited for a worker (0: none queued).",
        value=max(0.0, (timezone.now() - oldest).total_seconds()) if oldest else 0.0,
    )
    return [turns, waiting, _durations()]


def duration_rows() -> QuerySet:
    """Per status: how many turns finished within the window, their total run time and how many
    took at most each bucket's seconds (one range of the turn_finished_at index)."""
    took = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    buckets = {f"le_{i}": Count("id", filter=Q(took__lte=timedelta(seconds=b))) for i, b in enumerate(DURATION_BUCKETS)}
    since = timezone.now() - timedelta(seconds=settings.ADKWEB_METRICS_TURN_WINDOW_SECONDS)
    return (
        Turn.objects.filter(finished_at__gte=since, status__in=[Turn.Status.DONE, Turn.Status.FAILED])
        .exclude(started_at=None)
        .annotate(took=took)
        .order_by()
        .values("status")
        .annotate(n=Count("id"), total=Sum("took"), **buckets)
    )


def _durations() -> Metric:
    rows = duration_rows()
    family = HistogramMetricFamily(
        "adkweb_turn_duration_seconds",
        "How long the turns that finished lately (ADKWEB_METRICS_TURN_WINDOW_SECONDS) ran, from start to finish.",
        labels=["status"],
    )
    for values in rows:
        row: dict[str, Any] = dict(values)
        cumulative = [(str(b), row[f"le_{i}"]) for i, b in enumerate(DURATION_BUCKETS)] + [("+Inf", row["n"])]
        total = row["total"]
        family.add_metric([row["status"]], cumulative, sum_value=total.total_seconds() if total else 0.0)
    return family
