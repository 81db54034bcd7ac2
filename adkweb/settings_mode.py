"""The mode adkweb runs in, read once from the environment: adkweb/settings.py and its section modules
import it (embedded: no Redis; deployed: Redis or a database server)."""

import os

DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")
EMBEDDED = not REDIS_URL
# The embedded demo (`make run`, the tests) is no Redis and SQLite. Anything else (Redis, or a
# database server) is a deployment: DEBUG is off unless asked for and a secret key is required.
DEPLOYED = bool(REDIS_URL) or bool(DATABASE_URL and not DATABASE_URL.startswith("sqlite"))
