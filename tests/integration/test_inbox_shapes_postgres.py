"""The inbox's queries compiled once per shape, on PostgreSQL (tests/approvals/test_inbox_shapes.py: the
same pages as the ORM's, page by page, and no query built or compiled again), where the Next and Previous
links' cursors (a datetime) are kept shapes' parameters too."""

from __future__ import annotations

import pytest

from tests.approvals.test_inbox_shapes import (  # noqa: F401 - run here on PostgreSQL
    test_a_search_for_a_tickets_number_finds_it_and_what_mentions_it,
    test_an_argument_the_query_transforms_is_not_substituted,
    test_an_inbox_page_with_other_values_builds_and_compiles_no_query_again,
    test_compiled_pages_show_what_the_orm_shows_page_by_page,
)

pytestmark = pytest.mark.django_db
