"""`file` source: a registry file on the local disk (or a mounted volume).

Besides the interval, the file's folder is watched (inotify through watchfiles), so an edit is served
within moments. The folder, not the file, because editors and Kubernetes volume updates replace files
by renaming.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import watchfiles

from mcpfleet.registry.sources.base import MAX_DOCUMENT_BYTES, Fetched, SourceError, fetched_bytes, too_large


class FileReader:
    def __init__(self, source: str, fmt: str, path: Path) -> None:
        self.source, self.fmt, self.path = source, fmt, path

    async def fetch(self) -> Fetched:
        try:
            content = await asyncio.to_thread(self._read)
        except OSError as exc:
            raise SourceError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if len(content) > MAX_DOCUMENT_BYTES:
            raise too_large(len(content))
        return fetched_bytes(self.source, self.fmt, content)

    def _read(self) -> bytes:
        # At most one byte over the limit: a huge (or endless, e.g. /dev/zero) file is never held whole.
        with self.path.open("rb") as handle:
            return handle.read(MAX_DOCUMENT_BYTES + 1)

    async def watch(self) -> AsyncIterator[None]:
        """Yields after changes in the file's folder that may concern the file."""
        folder = self.path.parent
        async for changes in watchfiles.awatch(folder, debounce=200, recursive=False):
            # Kubernetes ConfigMap volumes swap a `..data` symlink; the file name itself may not appear.
            if any(Path(p).name in (self.path.name, "..data") for _, p in changes):
                yield None

    async def close(self) -> None:
        return None
