"""The parent-death signal for child processes (Linux `prctl(PR_SET_PDEATHSIG)`).

A child started with `preexec_fn=die_with_parent()` is killed by the kernel when the thread that
forked it exits — so when its parent process dies, however (SIGKILL and the OOM killer included).
Used for every process `mcpfleet up` starts (`platform/local/launch.py`) and for the stdio server of
a proxy running as a process of its own (`proxy/child.py`). The setting is not inherited across
fork: what the child starts itself needs another mechanism (`platform/local/reaper.py`).
Elsewhere than Linux it is a no-op.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1
_prctl: Any = None


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` asking for `sig` when the forking thread ends; None where prctl does not exist.

    The libc function is looked up here, before the fork (nothing is loaded in the child). If the
    parent died between the fork and the prctl, the child is already an orphan: it exits at once."""
    global _prctl
    if not sys.platform.startswith("linux"):
        return None
    if _prctl is None:
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl, parent = _prctl, os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec
