from . import agent  # noqa: F401  (ADK's agent loader imports the package and reads agent.root_agent)
