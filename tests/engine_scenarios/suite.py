"""The engine scenarios as tests, written once: a test module subclasses `EngineScenarios` and its
directory's conftest supplies `worker` (the in-process worker on SQLite in tests/, a `celery worker`
subprocess on PostgreSQL and Redis in tests/integration/)."""

from __future__ import annotations

import pytest

from . import durability, flaky, policies, tickets, turns


class EngineScenarios:
    @pytest.fixture
    def flaky_app(self, settings):
        settings.ADKWEB_CODE_AGENTS = {**settings.ADKWEB_CODE_AGENTS, flaky.APP_NAME: flaky.DOTTED}

    def test_reimbursement_under_100_pays_without_a_ticket(self, demo, worker, wait):
        tickets.reimbursement_under_100_pays_without_a_ticket(demo, wait)

    def test_reimbursement_over_100_takes_an_update_then_approval(self, demo, worker, wait):
        tickets.reimbursement_over_100_update_then_approval(demo, wait)

    def test_reimbursement_over_100_rejected_with_the_reason(self, demo, worker, wait):
        tickets.reimbursement_over_100_rejected_with_reason(demo, wait)

    def test_second_final_response_is_refused_and_reaches_nobody(self, demo, worker, wait):
        tickets.second_final_response_is_refused_and_reaches_nobody(demo, wait)

    def test_racing_final_responses_exactly_one_wins(self, demo, worker, wait):
        tickets.racing_final_responses_one_wins(demo, wait)

    def test_ticket_agent_create_started_final(self, demo, worker, wait):
        tickets.ticket_agent_three_turns(demo, wait)

    def test_confirmation_approved_runs_the_tool(self, demo, worker, wait):
        tickets.confirmation_approved_runs_the_tool(demo, wait)

    def test_confirmation_denied_says_why(self, demo, worker, wait):
        tickets.confirmation_denied_says_why(demo, wait)

    def test_input_request_refuses_a_body_outside_its_schema(self, demo, worker, wait):
        tickets.input_request_checks_the_schema(demo, wait)

    def test_queued_messages_run_in_order_one_at_a_time(self, demo, worker, wait):
        turns.queued_messages_run_in_order_one_at_a_time(demo, wait)

    def test_stock_price_is_stored_wrapped_as_result(self, demo, worker, wait):
        turns.stock_price_is_wrapped_as_result(demo, wait)

    def test_agent_tool_answer_ends_the_parents_turn(self, demo, worker, wait):
        turns.agent_tool_answer_ends_the_parents_turn(demo, wait)

    def test_failed_turn_is_recorded_and_the_next_message_runs(self, demo, worker, wait, flaky_app):
        turns.failed_turn_is_recorded_and_the_next_message_runs(demo, wait)

    def test_approval_survives_a_broker_outage(self, demo, worker, wait):
        durability.approval_survives_a_broker_outage(demo, wait)

    def test_turn_of_a_dead_worker_is_retried(self, demo, worker, wait):
        durability.turn_of_a_dead_worker_is_retried(demo, wait)

    # -- approval policies -----------------------------------------------------------------------
    def test_two_of_n_approvals_then_the_agent_resumes(self, demo, worker, wait):
        policies.two_of_n_approvals_then_the_agent_resumes(demo, wait)

    def test_four_eyes_keeps_the_requester_off_their_own_transfer(self, demo, worker, wait):
        policies.four_eyes_keeps_the_requester_off_their_own_transfer(demo, wait)

    def test_auto_approve_resumes_the_agent_with_no_person(self, demo, worker, wait):
        policies.auto_approve_resumes_the_agent_with_no_person(demo, wait)

    def test_escalation_then_expiry_and_the_agent_is_told(self, demo, worker, sweeper, wait):
        policies.escalation_then_expiry_and_the_agent_is_told(demo, wait)

    def test_standing_grant_approves_the_next_ticket_at_once(self, demo, worker, wait):
        policies.standing_grant_approves_the_next_ticket_at_once(demo, wait)

    def test_edits_reach_the_tool(self, demo, worker, wait):
        policies.edits_reach_the_tool(demo, wait)

    def test_racing_for_the_last_approval_closes_once(self, demo, worker, wait):
        policies.racing_for_the_last_approval_closes_once(demo, wait)
