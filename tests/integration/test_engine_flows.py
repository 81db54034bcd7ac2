"""Engine scenarios with PostgreSQL, Redis and a real `celery worker` subprocess: the same
scenario code as tests/agents_app/test_engine_flows.py (embedded mode), here across processes."""

import os

from tests.engine_scenarios import flaky
from tests.engine_scenarios.suite import EngineScenarios

# The worker subprocess reads its code agents from the environment when it starts (after
# collection): give it the throwaway failing agent too.
_agents = os.environ.get("ADKWEB_CODE_AGENTS", "")
if flaky.DOTTED not in _agents:
    os.environ["ADKWEB_CODE_AGENTS"] = ",".join(filter(None, [_agents, f"{flaky.APP_NAME}={flaky.DOTTED}"]))


class TestEngineFlows(EngineScenarios):
    pass
