"""adkweb's HTTP API: ADK's own REST shape (`/api/adk/`), served over durable agent runs.

`http` holds what every API view shares (auth, CSRF, JSON bodies, errors); the approvals API in
`approvals.api` uses it too.
"""
