"""Django's PostgreSQL backend, with a step that may run while a transaction's COMMIT is on its way
(see base.py). Named so that `ENGINE.endswith("postgresql")` (the settings' and the tests' checks) still
holds."""
