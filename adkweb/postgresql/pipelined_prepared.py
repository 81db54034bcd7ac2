"""The statements of a transaction sent whole (adkweb.postgresql.pipelined.committed_with) that are PREPAREd
once per connection and sent as `EXECUTE name(literals)`.

A statement given as `Prepared` (`prepared`) is PREPAREd once per connection (a round trip of its own,
before the transaction's, the first time) and sent as `EXECUTE name(literals)`: parsed once and planned
with it (generic after PostgreSQL's first five), where its text was parsed, analysed and planned at every
message (bench/README.md, phase 26 (queue)). Django's execute wrappers still see its text. Where the server
lost what the connection prepared (DISCARD ALL, a pooler), the EXECUTE fails before anything is written: the
transaction (its BEGIN and nothing else) is rolled back (`lost_here`) and sent again as text, and that
connection prepares its statements again the next time (adkweb.postgresql.prepared_here: text on it after a
few such losses); a PREPARE the server refuses leaves that statement as text.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Any

from psycopg import generators, pq

from .prepared_here import PreparedHere

logger = logging.getLogger("adkweb.postgresql.pipelined")  # its log lines, as before the split

NO_SUCH_STATEMENT = "26000"  # invalid_sql_statement_name: an EXECUTE of a name the connection does not know
ALREADY_PREPARED = "42P05"  # duplicate_prepared_statement


@dataclass(frozen=True)
class Prepared:
    """A statement of `committed_with`'s (its `text`, named %(x)s placeholders) as PREPAREd and EXECUTEd."""

    text: str
    name: str
    prepare: str  # PREPARE name AS the text, $n for its placeholders (their types inferred by the server)
    execute: str  # EXECUTE name(%(x)s, ...)


def prepared(prefix: str, text: str) -> Prepared:
    """`text` to be prepared under `prefix` + a hash of its body (the same text, the same name)."""
    if "%%" in text or "%s" in text:
        raise ValueError("prepared: named placeholders only")
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    body = text
    for i, name in enumerate(names, 1):
        body = body.replace(f"%({name})s", f"${i}")
    label = prefix + hashlib.sha1(body.encode()).hexdigest()[:16]
    execute = f"EXECUTE {label}(" + ", ".join(f"%({n})s" for n in names) + ")" if names else f"EXECUTE {label}"
    return Prepared(text, label, f"PREPARE {label} AS {body}", execute)


_here = PreparedHere("message's turn statement")  # connection -> names prepared
_refused: set[str] = set()  # names whose PREPARE the server refused: sent as text


def usable(raw: Any, statements: dict[str, Prepared]) -> dict[str, Prepared]:
    """Those of `statements` prepared on this connection (PREPAREd here the first time: the connection is
    idle, no transaction begun), by their text."""
    ready = _here.ready(raw) if statements else None
    if ready is None:
        return {}
    use = {}
    for text, statement in statements.items():
        if statement.name not in ready and statement.name not in _refused:
            raw.pgconn.send_query(statement.prepare.encode(raw.info.encoding))
            (result,) = raw.wait(generators.execute(raw.pgconn))
            state = result.error_field(pq.DiagnosticField.SQLSTATE)
            if result.status == pq.ExecStatus.COMMAND_OK or state == ALREADY_PREPARED:  # its name says its text
                ready.add(statement.name)
            else:
                if (state or "").startswith("42"):  # the text itself (a placeholder's type not inferred): for good
                    _refused.add(statement.name)
                logger.warning("committed_with: could not prepare %s (%s); sending its text.", statement.name, state)
        if statement.name in ready:
            use[text] = statement
    return use


def lost_here(raw: Any) -> None:
    """The connection's server lost what it prepared (an EXECUTE found no such name): forget it here, and roll
    back the transaction that failed on it (its BEGIN alone ran), to send it again as text."""
    _here.lost(raw)
    raw.pgconn.send_query(b"ROLLBACK")
    raw.wait(generators.execute(raw.pgconn))
