"""glibc malloc settings for the long-running data-plane servers (vMCP gateway, registry, `mcpfleet up`).

`one_arena` (the registry server, always): every thread allocates from glibc's main arena. The
registry reads its catalogue in a worker thread and builds each entry's answer on the event loop on
first use; with an arena per thread, neither reuses what the other freed (101 MB after a first walk
of 10,000 entries instead of 95, measured). Python threads allocate under the GIL, so one arena costs
no contention worth an arena per thread.

`tune` (opt-in):

A `tools/list` of 1,000 tools builds and frees a response of a few hundred KB on every call. With
glibc's defaults such a block is either mmap-ed and unmapped (128 KB threshold) or taken from the
heap top and trimmed back to the OS (trim threshold: twice a threshold glibc moves by itself as
blocks are freed), so depending on what the process did before, each list faults the same pages in
again (~76 minor faults, 0.25 ms instead of 0.11 ms). Fixing both thresholds makes it the fast path
in every process: blocks up to `MMAP_THRESHOLD` come from the heap, and the heap keeps up to
`TRIM_THRESHOLD` of free memory at its top instead of returning it after each request. The cost is
that bounded amount of memory held after a peak.

Opt-in (`MCPFLEET_MALLOC_TUNE=1`): `bench/vmcp_steady.py` compares both settings and found no steady
difference on glibc here (its dynamic threshold had already moved above the response size), while the
tuning holds up to `TRIM_THRESHOLD` after a peak, so the default leaves glibc alone. The per-process slow mode that
remained had another cause, 4K aliasing of large copies: see `mcpfleet.vmcp.pinned`. Not glibc (musl,
macOS): nothing to do.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

ENV = "MCPFLEET_MALLOC_TUNE"
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 4 * 1024 * 1024
TRIM_THRESHOLD = 32 * 1024 * 1024


def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's `mallopt`, None elsewhere (musl, macOS)."""
    try:
        # Named directly: ctypes.util.find_library runs ldconfig (milliseconds of a start).
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def one_arena() -> bool:
    """Serve every thread from the main arena (what `MALLOC_ARENA_MAX=1` does); call it before other
    threads allocate. True when it was set."""
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(M_ARENA_MAX, 1))


def tune() -> bool:
    """Apply the thresholds (once per process, before serving); True when they were set."""
    if os.environ.get(ENV, "0") != "1":
        return False
    mallopt = _mallopt()
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
