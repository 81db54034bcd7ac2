"""The approvals API's ticket list on PostgreSQL, where "mine" reads from who takes part in which ticket
(approvals.selectors.mine.mine_narrow's SQL) and a deep page seeks its first row by key: the same tests as
on SQLite (tests/approvals/test_api_list.py)."""

from __future__ import annotations

from tests.approvals.conftest import api  # noqa: F401 - the fixture, for the tests below
from tests.approvals.test_api_list import (  # noqa: F401 - run here on PostgreSQL
    test_bad_list_parameters_are_400_with_a_message,
    test_counts_are_capped_and_say_so,
    test_mine_is_what_i_was_assigned_closed_or_answered_and_search_finds_by_arguments,
    test_next_and_previous_links_walk_every_ticket_once_and_new_ones_do_not_shift_them,
    test_the_list_takes_a_constant_number_of_queries,
)
