"""Follows the gateway's config file and applies its live-applicable settings in place.

Both platforms change the file under a running gateway: `mcpfleet up` replaces it atomically (a
rename), and the kubelet swaps a mounted ConfigMap's `..data` symlink. Polling `os.stat` (which
follows the symlink) for a new inode, mtime or size sees both, with no platform-specific watcher.
Only `LIVE_CONFIG_FIELDS` are taken (`Gateway.reconfigure`); the platforms restart the gateway for
the rest (`WorkloadPlan.rollout_checksum`).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from mcpfleet.policy.engine import stamp
from mcpfleet.vmcp.config import ConfigError, load_config

if TYPE_CHECKING:
    from mcpfleet.vmcp.gateway import Gateway

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0


class ConfigWatcher:
    """Re-reads `path` when it changes and hands the result to the gateway."""

    def __init__(self, path: str | Path, gateway: Gateway, interval: float = POLL_SECONDS) -> None:
        self.path = Path(path)
        self.gateway = gateway
        self.interval = interval
        self._seen = stamp(self.path)

    def check(self) -> set[str] | None:
        """Apply the file if it changed since last seen; the list methods that changed, else None."""
        current = stamp(self.path)
        if current is None or current == self._seen:
            return None
        self._seen = current
        try:
            config = load_config(self.path)
        except ConfigError as exc:
            # A half-written or invalid file: keep serving what we have; the next change retries.
            log.warning("config changed but was not applied: %s", exc)
            return None
        return self.gateway.reconfigure(config)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.check()
            except Exception:
                log.exception("applying the changed config failed; keeping the current settings")
