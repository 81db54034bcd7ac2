"""In a real browser: the inbox's and the ticket page's relative times ("due in 10 minutes", "3 minutes ago")
stay true while the page is open, with no push from the server (static/js/reltime.js re-renders each
<time data-rel> as the clock moves: Playwright's clock moves it here), and say what Django's timesince and
timeuntil say for the same instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone
from django.utils.timesince import timesince, timeuntil
from playwright.sync_api import expect

from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket
from tests.browser.test_approvals_browser import open_inbox

NB = "\u00a0"  # Django's timesince joins a number and its unit with a no-break space
AHEAD = timedelta(minutes=10, seconds=30)


def _pushed_frames(page) -> list[str]:
    """The frames the page's sockets receive from now on."""
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))
    return frames


def test_an_open_inboxs_due_in_and_age_move_with_the_clock(demo, login):
    ticket = open_ticket()
    now = timezone.now()  # last changed a minute ago: its row is not pushed again when the inbox's socket connects
    PendingCall.objects.filter(pk=ticket.pk).update(
        due_at=now + AHEAD, created_at=now, updated_at=now - timedelta(minutes=1)
    )
    page = login("approver")
    page.clock.install()  # the page's clock runs as the real one until moved
    frames = _pushed_frames(page)
    open_inbox(page)
    row = page.locator(f"#pending-call-{ticket.pk}")
    expect(row.locator(".due")).to_have_text(f"due in 10{NB}minutes")
    expect(row.locator("td[data-label=Age]")).to_have_text(f"0{NB}minutes")
    loads = page.evaluate("performance.getEntriesByType('navigation').length")
    page.clock.run_for("03:00")
    expect(row.locator(".due")).to_have_text(f"due in 7{NB}minutes")
    expect(row.locator("td[data-label=Age]")).to_have_text(f"3{NB}minutes")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == loads  # no reload
    assert not [f for f in frames if f"pending-call-{ticket.pk}" in f]  # and no push: the page's own clock


def test_a_ticket_pages_due_and_ages_move_with_the_clock(demo, login):
    ticket = open_ticket()
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() + AHEAD, created_at=timezone.now())
    page = login("approver")
    page.clock.install()
    page.goto(f"/tickets/{ticket.pk}/")
    expect(page.locator(".ticket-grid[data-ws-open]")).to_have_count(1)
    due = page.locator("p.due")
    expect(due).to_contain_text(f"(in 10{NB}minutes)")
    created = page.locator("#ticket-title + p.meta time[data-rel=ago]")
    expect(created).to_have_text(f"0{NB}minutes ago")
    page.clock.run_for("03:00")
    expect(due).to_contain_text(f"(in 7{NB}minutes)")
    expect(created).to_have_text(f"3{NB}minutes ago")


def test_the_pages_relative_times_say_what_djangos_timesince_and_timeuntil_say(demo, login):
    page = login("approver")
    base = datetime(2026, 1, 31, 23, 59, 59, 999000, tzinfo=UTC)
    pairs = [(base, base + timedelta(seconds=s)) for s in (-90, 0, 0.5, 59.999, 60, 61, 119, 3599, 3600, 7261, 86399)]
    spans = ((1, 0), (6, 23), (7, 1), (13, 5), (29, 0), (31, 2))
    pairs += [(base, base + timedelta(days=d, hours=h)) for d, h in spans]
    pairs += [
        (datetime(2013, 2, 10, tzinfo=UTC), datetime(2014, 3, 10, tzinfo=UTC)),
        (datetime(2007, 8, 10, tzinfo=UTC), datetime(2008, 9, 10, tzinfo=UTC)),
        (datetime(2024, 2, 29, 12, tzinfo=UTC), datetime(2025, 3, 1, 11, tzinfo=UTC)),
        (datetime(2024, 1, 31, 8, 30, tzinfo=UTC), datetime(2024, 3, 1, 8, 29, tzinfo=UTC)),
        (datetime(2023, 12, 31, 23, 0, tzinfo=UTC), datetime(2026, 12, 7, 15, 45, 30, tzinfo=UTC)),
    ]
    ms = [[d.timestamp() * 1000, now.timestamp() * 1000] for d, now in pairs]
    shown = page.evaluate("pairs => pairs.map(([d, now]) => [adkwebTime.since(d, now), adkwebTime.since(now, d)])", ms)
    assert shown == [[timesince(d, now), timeuntil(d, now)] for d, now in pairs]
