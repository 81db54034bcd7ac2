"""Tables that hold rows but no planner statistics yet are ANALYZEd, so the pages' plans do not go wrong in
the minute after a bulk load (a restore with pg_restore, an import, a data migration's backfill, a fresh
database filling fast) before autovacuum's ANALYZE reaches them.

Without statistics PostgreSQL takes `archived_at IS NULL` for 0.5% of the sessions (its default for a null
test) where nearly all are live: the conversation list then reads every live session through the partial
unique index and sorts them, rather than the newest 26 from the recency index; the inbox sorts every ticket
(tests/integration/test_pages_unanalyzed_postgres.py; with 5,000 sessions and 3,000 tickets, EXPLAIN ANALYZE:
the approver's list 11.4 ms against 0.28 analyzed, the inbox's status=all 19.5 against 0.68, growing with the
tables). A partial index on live sessions does not help (tried: the estimate is the same). Statistics do, and
only a table's first ANALYZE matters here (later ones, autovacuum's, keep them current; a table whose
statistics are old still has its columns' null fractions).

`analyze_missing` reads the catalog once (which of the models' tables have no row in pg_stats and more than
a few pages) and ANALYZEs those: on an established database nothing. The owed-work sweeper calls it (beat
every 15 s, the embedded sweeper more often: agents_app.tasks.turns_requeue_owed), and so does the sessions'
status backfill (agents_app.session_status.sessions_status_refresh: a migration's, the bench seed's), whose
UPDATE without statistics walked every turn for each session (bench/pages_seed.py: hours). ANALYZE takes a
lock that blocks no read or write; where the role may not analyze a table PostgreSQL says so as a warning
and skips it; a failure is logged, never raised into the sweep (nor into a migration's transaction: a
savepoint).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.apps import apps
from django.db import connection, transaction

logger = logging.getLogger(__name__)

MIN_BYTES = 64 * 1024  # 8 pages (a few hundred rows): below that any plan reads the table in a blink

_MISSING = """
SELECT c.relname FROM pg_catalog.pg_class c
WHERE c.oid IN (SELECT pg_catalog.to_regclass(t) FROM unnest(%s::text[]) AS t)  -- a table not made yet: none
  AND pg_catalog.pg_relation_size(c.oid) >= %s
  -- an ANALYZE that found no live row leaves none in pg_stats: again only once the table has grown since
  AND NOT (c.reltuples = 0 AND c.relpages::bigint * current_setting('block_size')::int >= pg_relation_size(c.oid))
  AND NOT EXISTS (
    SELECT 1 FROM pg_catalog.pg_stats s
    WHERE s.schemaname = pg_catalog.current_schema() AND s.tablename = c.relname
  )
ORDER BY c.relname
"""


def analyze_missing(tables: Iterable[str] | None = None) -> list[str]:
    """ANALYZE those of `tables` (the models' tables by default) that hold rows but no statistics; returns
    their names. Nothing on another database than PostgreSQL."""
    if connection.vendor != "postgresql":
        return []
    names = list(tables) if tables is not None else _model_tables()
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # a savepoint in a migration's transaction
            cursor.execute(_MISSING, [names, MIN_BYTES])
            missing = [name for (name,) in cursor.fetchall()]
            for name in missing:
                cursor.execute(f"ANALYZE {connection.ops.quote_name(name)}")
    except Exception:
        logger.warning("Could not analyze the tables that have no statistics yet.", exc_info=True)
        return []
    if missing:
        logger.info("Analyzed %s: they held rows but no planner statistics yet.", ", ".join(missing))
    return missing


def _model_tables() -> list[str]:
    return sorted({m._meta.db_table for m in apps.get_models() if m._meta.managed and not m._meta.proxy})
