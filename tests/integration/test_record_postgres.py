"""Nothing erased, on PostgreSQL: the archive, the snapshot, the read-only admin, the chain, the
audit page and its streamed exports (server-side cursors here), and the configuration history with
a real worker subprocess (imported, not copied: the same tests run here on PostgreSQL); and
concurrent decisions on many tickets at once still forming one unbroken chain (the chain's head row
is locked)."""

# ruff: noqa: F401  (imported so that pytest collects them here again, on PostgreSQL)
from __future__ import annotations

import io
import threading

from django.core.management import call_command
from django.db import connection

from approvals import services
from approvals.models import DecisionChain, Response
from tests.agents_app.test_config_history import (
    test_admin_changes_are_versions_with_who_and_when,
    test_demo_setup_records_version_1_once,
    test_each_turn_records_the_configuration_it_ran_with,
)
from tests.approvals.test_audit_export import (
    exported,
    test_csv_export,
    test_exports_refuse_requesters_and_bad_filters,
    test_exports_stream_with_flat_memory,
    test_jsonl_export,
)
from tests.approvals.test_audit_page import (
    decided,
    test_archived_conversations_decisions_stay_on_the_audit_page,
    test_bad_filters_are_400_with_a_message,
    test_everything_is_escaped,
    test_filters,
    test_period_filter_by_day,
)
from tests.approvals.test_decision_chain import (
    test_audit_verify_names_a_payload_change_and_a_rehashed_row,
    test_audit_verify_names_a_removed_row,
    test_audit_verify_names_a_row_changed_with_raw_sql,
    test_audit_verify_notices_a_truncated_tail,
    test_audit_verify_passes_on_a_clean_chain,
    test_each_decision_is_chained_to_the_previous_one,
    test_the_data_migration_chains_existing_decisions,
)
from tests.approvals.test_record_archive import (
    test_a_busy_session_is_not_archived,
    test_a_deleted_session_id_can_be_created_again,
    test_a_deleted_user_keeps_their_decisions,
    test_admin_cannot_delete_or_edit_tickets_and_responses,
    test_admin_delete_of_a_session_archives_it,
    test_deleting_a_session_archives_it,
    test_the_database_refuses_to_cascade,
)
from tests.approvals_factories import ticket

N = 40


def test_concurrent_decisions_on_many_tickets_form_one_chain(demo, transactional_db, monkeypatch):
    # The decisions commit: keep their turns from the session's worker subprocess, which would still
    # be running them while the test database is flushed (the chain is what is tested here).
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kwargs: True)
    tickets = [ticket() for _ in range(N)]
    barrier = threading.Barrier(N)
    errors: list[BaseException] = []

    def decide(i: int) -> None:
        try:
            barrier.wait()
            if i % 2:
                services.ticket_reject(ticket=tickets[i], actor=demo["approver"], reason=f"no {i}")
            else:
                services.ticket_approve(ticket=tickets[i], actor=demo["admin"], comment=f"ok {i}")
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    seqs = sorted(Response.objects.values_list("chain_seq", flat=True))
    assert seqs == list(range(1, N + 1))  # one chain: no position taken twice, none skipped
    assert DecisionChain.objects.get().length == N
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue().startswith(f"Decision chain intact: {N} decision(s)")
