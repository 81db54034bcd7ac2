"""The arguments hash: binds a decision (and a one-tap link) to the arguments the decider saw."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def args_hash(args: Any) -> str:
    """sha256 hex of the arguments as canonical JSON (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
