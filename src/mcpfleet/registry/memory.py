"""Giving freed heap memory back to the OS after the registry's large, short-lived allocations.

A sync reads and parses a whole source (7 MB of JSON at 10,000 entries, several times that parsed) and
a reload reads every catalogue row; once freed, glibc keeps most of those pages mapped, so they stay
in the RSS for the life of the process. `malloc_trim(0)` releases the free pages (a few milliseconds);
elsewhere than glibc this is a no-op.
"""

from __future__ import annotations

import ctypes
from typing import Any

_trim: Any = None


def return_free_memory() -> None:
    """Release the heap's free pages to the OS (glibc `malloc_trim(0)`); a no-op without glibc."""
    global _trim
    if _trim is None:
        try:
            # Named directly: ctypes.util.find_library would run ldconfig.
            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)
