"""Apps served by other ADK servers (Python, Go, Java, TypeScript), driven over ADK's REST API.

`agents_app.remote_models` holds their configuration and the link of each local session to its twin,
`client` speaks ADK's REST API, `run` runs a turn on the remote server and mirrors its events.
"""
