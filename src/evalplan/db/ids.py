"""Server-side identifiers: a type prefix plus a time-ordered, process-monotonic suffix.

Ids sort in creation order (so lists and wide-matrix rows keep upload order) and
never look like a plain benchmark or model name.
"""

from __future__ import annotations

import itertools
import re
import secrets
import threading
import time

_lock = threading.Lock()
_counter = itertools.count()
_last_ms = 0


def new_id(prefix: str) -> str:
    """Return ``<prefix>_<12 hex ms><6 hex counter><6 hex random>``, monotonic within a process."""
    global _last_ms
    with _lock:
        ms = max(int(time.time() * 1000), _last_ms)
        _last_ms = ms
        seq = next(_counter) & 0xFFFFFF
    return f"{prefix}_{ms:012x}{seq:06x}{secrets.token_hex(3)}"


ID_PATTERN = re.compile(r"^[a-z]+_[0-9a-f]{24}$")


def looks_like_id(name: str) -> bool:
    """True for strings shaped like a server id; such names are refused (lookups try ids first)."""
    return bool(ID_PATTERN.match(name))
