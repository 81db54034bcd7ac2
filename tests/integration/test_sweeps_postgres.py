"""The bad-input and security sweeps on PostgreSQL: the same corpus and the same tests as
tests/adkweb/bad_input/ and tests/adkweb/security/ (imported, not copied). Issue 8
found 13 of 124 requests that were refused on SQLite but answered 500 on PostgreSQL (NUL
characters, unpaired surrogates, page numbers out of range)."""

# ruff: noqa: F401  (imported so that pytest collects them here again, on PostgreSQL)
import pytest

from tests.adkweb.bad_input.conftest import _quiet_request_logs, objs
from tests.adkweb.bad_input.test_admin_lookups import (
    test_a_refusal_shows_the_urls_text_as_text_not_markup,
    test_admin_list_lookups_no_database_can_apply_are_400s,
    test_admin_lookups_and_to_fields_the_admin_does_not_allow_are_400s_saying_so,
)
from tests.adkweb.bad_input.test_admin_pages import (
    one_per_page,
    test_admin_list_actions_on_ids_that_are_none_are_400s_saying_so,
    test_admin_list_pages_past_the_end_are_404s_saying_so,
)
from tests.adkweb.bad_input.test_api import (
    test_api_artifacts_longer_than_their_columns_are_refused,
    test_api_numbers_past_a_float_are_refused,
    test_api_raw_garbage_bodies,
    test_api_wrong_json_for_each_endpoint,
    test_closed_ticket_is_409_and_changes_nothing,
)
from tests.adkweb.bad_input.test_deep_json import (
    test_json_nested_past_the_limit_is_refused,
    test_json_nested_to_the_limit_is_taken,
)
from tests.adkweb.bad_input.test_genai_enum_values import (
    test_an_enum_field_given_its_name_is_taken,
    test_an_enum_field_that_is_not_a_name_is_a_422,
)
from tests.adkweb.bad_input.test_pages import (
    test_a_page_number_past_a_capped_list_shows_the_page_past_the_end,
    test_login_with_bad_input_rerenders_the_form_with_an_error,
    test_page_posts_with_bad_input,
    test_urls_with_unstorable_text_or_pages_out_of_range,
)
from tests.adkweb.bad_input.test_session_ids import (
    test_a_session_id_no_url_can_address_is_refused_on_create,
    test_a_session_that_has_such_an_id_stays_readable,
    test_ids_adk_clients_make_are_accepted,
)
from tests.adkweb.bad_input.test_socket_messages import test_sockets_drop_what_their_client_sends_and_stay_open
from tests.adkweb.bad_input.test_sockets import test_sockets_with_query_strings_no_url_holds_are_refused
from tests.adkweb.bad_input.test_surfaces import (
    test_audit_periods_at_the_ends_of_the_calendar,
    test_duplicates_are_409_naming_the_one_there_and_change_nothing,
    test_hostile_values_are_refused_with_a_message_and_change_nothing,
    test_policy_form_refusals,
    test_webhook_urls_with_a_port_no_connection_has_are_refused,
)
from tests.adkweb.bad_input.test_url_map import test_every_url_with_hostile_parameters_and_bodies_is_never_a_5xx
from tests.adkweb.security.conftest import world
from tests.adkweb.security.test_csrf import (
    test_api_token_requests_need_no_csrf_but_a_session_cookie_does,
    test_token_in_header_passes_csrf_page_and_api,
    test_unsafe_requests_without_csrf_token_are_refused_everywhere,
)
from tests.adkweb.security.test_escaping import test_tool_arguments_and_model_output_are_escaped_everywhere
from tests.adkweb.security.test_url_roles import test_every_url_is_in_the_table, test_url_role_sweep
from tests.adkweb.security.test_websockets import (
    test_anonymous_sockets_are_refused_through_the_real_stack_without_scope_user,
    test_every_websocket_route_is_in_the_table,
    test_mallory_on_the_list_socket_gets_no_row_for_the_requesters_session,
    test_websocket_routes_refuse_anonymous_and_unauthorised_users,
)


@pytest.fixture(autouse=True)
def _own_layer():
    """A Redis channel layer instance of this module's own: channels_redis serves one event loop
    at a time per instance, and the live server of an earlier module may still hold the shared one."""
    from channels.layers import channel_layers

    shared = channel_layers.backends.get("default")
    channel_layers.backends["default"] = channel_layers.make_backend("default")
    yield
    if shared is None:
        channel_layers.backends.pop("default", None)
    else:
        channel_layers.backends["default"] = shared
