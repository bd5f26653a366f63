"""What wakes the local runner between its once-a-second passes: a manifest file changed, or a
gateway rewrote its report file.

Manifest file events (watchfiles) trigger a reload at once, and an empty batch every
RELOAD_SECONDS re-reads anyway (events can be missed). A gateway's report is how its backends'
health reaches its status, and `up` counts a gateway ready only once it reported every backend:
one `stat` per gateway every REPORT_POLL_SECONDS sees a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from mcpfleet.platform.local.loader import YAML_SUFFIXES
from mcpfleet.platform.local.paths import file_signature

log = logging.getLogger(__name__)

REPORT_POLL_SECONDS = 0.1
"""How often the gateways' report files are looked at (`watch_reports`)."""
RELOAD_SECONDS = 10.0
"""Manifests are re-read at least this often even without a file event (events can be missed)."""


async def watch_manifests(root: Path, stop: asyncio.Event, changed: Callable[[], None]) -> None:
    """Call `changed` on every manifest file event under `root`, and every RELOAD_SECONDS anyway."""
    from watchfiles import awatch

    while not stop.is_set():
        try:
            async for _changes in awatch(
                root,
                watch_filter=lambda _change, path: is_manifest_path(root, path),
                stop_event=stop,
                debounce=300,
                step=50,
                rust_timeout=int(RELOAD_SECONDS * 1000),
                yield_on_timeout=True,  # an empty batch every RELOAD_SECONDS: the periodic re-read
            ):
                changed()
        except Exception as exc:  # e.g. the folder was removed: keep the last state, retry
            log.warning("watching %s failed (%s); retrying", root, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RELOAD_SECONDS)
            changed()


async def watch_reports(
    stop: asyncio.Event, files: Callable[[], list[Path]], changed: Callable[[], None]
) -> None:
    """Call `changed` as soon as one of `files()` (the gateways' report files) was rewritten
    (seen within REPORT_POLL_SECONDS), and at the first look at each."""
    seen: dict[Path, tuple[int, int, int] | None] = {}
    while not stop.is_set():
        for path in files():
            signature = file_signature(path)
            if path not in seen or seen[path] != signature:
                changed()  # also at the first look: a report written since the last pass
            seen[path] = signature
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), REPORT_POLL_SECONDS)


def is_manifest_path(root: Path, path: str) -> bool:
    """Whether a file event under `root` can change the manifests (the state dir inside DIR cannot)."""
    try:
        relative = Path(path).relative_to(root)
    except ValueError:
        return False
    if any(part.startswith(".") for part in relative.parts):
        return False  # hidden: editor swap files, .git, a .mcpfleet state dir inside DIR
    return relative.suffix in YAML_SUFFIXES or relative.suffix == ""  # a YAML file, or a folder
