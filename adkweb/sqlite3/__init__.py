"""Django's SQLite backend, its writers in one process queued on a lock (see base.py). Named so that
`ENGINE.endswith("sqlite3")` (the settings' and the tests' checks) still holds."""
