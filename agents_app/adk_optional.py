"""ADK's optional imports that cannot succeed here, made to fail once instead of on every run.

google-adk 2.13's `build_node` (google/adk/workflow/utils/_workflow_graph_utils.py), which every
`Runner.run_async` goes through, tries `from ...agents.remote_a2a_agent import RemoteA2aAgent` and
passes on ImportError. Without the `a2a` package (an extra adkweb does not install) that module
fails half way through its own imports, so Python forgets it and executes it again at the next
attempt: ~3 ms of CPU on every run on this VM (~5% of a worker's CPU under bench/http_flow.py; ADK's
own `api_server` pays it too). Recording the failure as Python records a module known to be missing
(None in sys.modules) makes every later attempt raise ImportError at once, which `build_node` passes
on as before. Done only when `a2a` cannot be found: an install with the extra is left alone.
"""

from __future__ import annotations

import importlib.util
import sys

REMOTE_A2A_AGENT = "google.adk.agents.remote_a2a_agent"


def settle() -> None:
    """Call before running agents (agents_app.worker_loop does, once per loop); cheap and idempotent."""
    if REMOTE_A2A_AGENT in sys.modules:  # imported (the extra is there) or already settled
        return
    if importlib.util.find_spec("a2a") is None:
        sys.modules[REMOTE_A2A_AGENT] = None  # type: ignore[assignment]
