"""adkweb's HTTP API: ADK's own REST shape (`/api/adk/`), served over durable agent runs.

What every API view shares (auth, CSRF, JSON bodies, refusals as JSON) is `adkweb.api`; the
approvals API (`approvals.api`) uses it too.
"""
