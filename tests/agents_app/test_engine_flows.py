"""Engine scenarios in embedded mode: SQLite and the real in-process Celery worker (memory broker).

The same scenarios run against PostgreSQL, Redis and a worker subprocess in
tests/integration/test_engine_flows.py.
"""

from tests.engine_scenarios.suite import EngineScenarios


class TestEngineFlows(EngineScenarios):
    pass
