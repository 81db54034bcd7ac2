"""The mode adkweb runs in, read once from the environment: adkweb/settings.py and its section modules
import it (embedded: no Redis; deployed: Redis or a database server)."""

import os

DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")
EMBEDDED = not REDIS_URL
# The embedded demo (`make run`, the tests) is no Redis and SQLite. Anything else (Redis, or a
# database server) is a deployment: DEBUG is off unless asked for and a secret key is required.
DEPLOYED = bool(REDIS_URL) or bool(DATABASE_URL and not DATABASE_URL.startswith("sqlite"))


def redis_url_refusal(url: str) -> str:
    """Why adkweb cannot run with `url` as REDIS_URL ('' when it can): a query that makes redis-py's clients
    (the wake-ups' pushes, the sockets' facts, health and metrics) encode or decode otherwise than the rest.
    adkweb's own Redis wire (the channel layer, the drainers' BLPOP, a decision's wake-up) and Celery's broker
    write keys as UTF-8: a client encoding `?encoding=utf-16` (or cp500) pushed every wake-up to a key no worker
    pops (each turn waited for the sweeper), and `?decode_responses=true` hands the drainers text where they read
    bytes. Refused at startup with what to change, not found by its symptoms."""
    import codecs
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(url).query, keep_blank_values=True)
    for name in query.get("encoding", []):
        try:
            utf8 = codecs.lookup(name).name == "utf-8"
        except LookupError:
            utf8 = False
        if not utf8:
            return (
                f"REDIS_URL asks for encoding={name}: adkweb's Redis clients write keys and messages as UTF-8 (its "
                "channel layer and wake-up lists speak Redis's protocol themselves), so a client encoding "
                "otherwise would write to keys the others never read. Remove ?encoding= from REDIS_URL "
                "(or set encoding=utf-8)."
            )
    for value in query.get("decode_responses", []):
        if value and value.upper() not in ("0", "F", "FALSE", "N", "NO"):  # redis-py's to_bool
            return (
                f"REDIS_URL asks for decode_responses={value}: adkweb reads Redis's replies as bytes. Remove "
                "?decode_responses= from REDIS_URL."
            )
    return ""


def secret_key_weakness(key: str) -> str:
    """Why `key` is too weak to sign a deployment's logins and links ('' when it is not): Django's own measure
    (`check --deploy`'s security.W009: under 50 characters, under 5 distinct ones, or the `django-insecure-`
    prefix `startproject` writes), and the embedded demo's key or a placeholder copied from the README."""
    if key in ("dev-only-insecure-key-for-the-embedded-demo", "...") or key.startswith("django-insecure-"):
        return "it is a published example, not a secret"
    if len(key) < 50:
        return f"{len(key)} characters, at least 50 are needed"
    if len(set(key)) < 5:
        return f"{len(set(key))} distinct characters, at least 5 are needed"
    return ""
