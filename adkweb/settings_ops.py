"""Operations settings (probes, metrics, the web process's garbage collector), imported by
adkweb/settings.py."""

import os

from django.core.exceptions import ImproperlyConfigured

from adkweb.settings_mode import DEPLOYED

# /readyz gives each check (database, broker, channel layer) this long before calling it down.
ADKWEB_READYZ_TIMEOUT = float(os.environ.get("ADKWEB_READYZ_TIMEOUT", "3"))
# /metrics (Prometheus): readable with `Authorization: Bearer <this token>` (unset: staff logins only).
ADKWEB_METRICS_TOKEN = os.environ.get("ADKWEB_METRICS_TOKEN", "")
if DEPLOYED and ADKWEB_METRICS_TOKEN and (len(ADKWEB_METRICS_TOKEN) < 16 or len(set(ADKWEB_METRICS_TOKEN)) < 5):
    raise ImproperlyConfigured(
        f"ADKWEB_METRICS_TOKEN is too weak to guard /metrics: {len(ADKWEB_METRICS_TOKEN)} characters "
        f"({len(set(ADKWEB_METRICS_TOKEN))} distinct), at least 16 (5 distinct) are needed. Set it to a random "
        "value, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`, or leave it unset (staff only)."
    )
# The database-derived metrics are read at most this often, however many scrapers ask.
ADKWEB_METRICS_CACHE_SECONDS = float(os.environ.get("ADKWEB_METRICS_CACHE_SECONDS", "5"))
# adkweb_turn_duration_seconds describes the turns that finished within this many seconds (a bounded
# read on the turn_finished_at index, not every turn ever run).
ADKWEB_METRICS_TURN_WINDOW_SECONDS = float(os.environ.get("ADKWEB_METRICS_TURN_WINDOW_SECONDS", "3600"))

# The web process's garbage collector (adkweb.gcpolicy): once websockets have stopped opening and closing
# for this many seconds, collect once and freeze what survives (their objects leave the full
# collections' walks); a thaw after ADKWEB_GC_THAW_CLOSES closes (or the frozen objects doubling) keeps
# the frozen cycles of closed sockets bounded. 0: off (the startup freeze stays).
ADKWEB_GC_SETTLE_SECONDS = float(os.environ.get("ADKWEB_GC_SETTLE_SECONDS", "1.0"))
ADKWEB_GC_THAW_CLOSES = int(os.environ.get("ADKWEB_GC_THAW_CLOSES", "1000"))

# Open websockets ask again whether their person may still see what they carry (adkweb.live_rights):
# every this many seconds (+-20%), never per message. A lost right (a role, a team) stops reaching a
# page within 1.3 times this where nothing announces it; a login that ends (a logout, a password changed,
# a deactivated account, its session expired) closes its sockets at once (adkweb.live_logins), a change
# of roles (groups, permissions, staff, a policy's groups) has them asked at once (adkweb.live_roles). 0: off.
ADKWEB_LIVE_RECHECK_SECONDS = float(os.environ.get("ADKWEB_LIVE_RECHECK_SECONDS", "60"))
