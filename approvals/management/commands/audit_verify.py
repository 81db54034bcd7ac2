"""Check the decision chain: `manage.py audit_verify` recomputes every decision's hash and exits
non-zero naming the first broken row (a decision changed, removed or inserted after the fact)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.models import F

from approvals.chain import verify
from approvals.models import DecisionChain, Response


class Command(BaseCommand):
    help = "Verify the tamper-evident chain of decisions; names the first broken row (exit status 1)."

    def handle(self, *args: Any, **options: Any) -> None:
        # Connected before `.iterator()` decides on a server-side cursor: a transaction-mode pooler is
        # recognised as the connection opens (agents_app.pooler), and then there is none.
        connection.ensure_connection()
        rows = Response.objects.order_by(F("chain_seq").asc(nulls_last=True), "id").iterator(chunk_size=2000)
        head = DecisionChain.objects.filter(pk=1).first()
        breaks = verify(rows, head)
        first = next(breaks, None)
        if first is not None:
            more = sum(1 for _ in breaks)
            also = f" ({more} more break(s) after it)" if more else ""
            raise CommandError(f"Decision chain broken at {first}{also}.")
        count = head.length if head else 0
        tail = f", last hash {head.last_hash}" if head and count else ""
        self.stdout.write(f"Decision chain intact: {count} decision(s){tail}.")
