"""glibc malloc settings for the long-running data-plane servers (vMCP gateway, `mcpfleet up`).

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
import ctypes.util
import os

ENV = "MCPFLEET_MALLOC_TUNE"
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 * 1024 * 1024
TRIM_THRESHOLD = 32 * 1024 * 1024


def tune() -> bool:
    """Apply the thresholds (once per process, before serving); True when they were set."""
    if os.environ.get(ENV, "0") != "1":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
