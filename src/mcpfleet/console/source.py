"""Where the console reads a fleet from: a local state folder (`LocalSource`) or the Kubernetes API
(`console.kubesource.KubeSource`). The pages only use the `FleetSource` protocol.

Both give objects as `StoredObject`s (kind, name, manifest, status), so a page renders a cluster's
object as it renders a local one. What only one side has is said by the source: logs and "add to
fleet" by writing a manifest are local (`writes_manifests`), the audit files are local files.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mcpfleet.console import fleetview, timeline
from mcpfleet.platform.local.snapshot import DB_FILENAME, StoredObject, read_objects


class SourceError(Exception):
    """The fleet could not be read (the Kubernetes API refused or did not answer); `status` is the
    HTTP status the page answers with (the API's own 4xx for a refusal, else 424)."""

    def __init__(self, message: str, status: int = 424) -> None:
        super().__init__(message)
        self.status = status


class FleetSource(Protocol):
    """What the pages read. Every method is read-only; the answer of a source that cannot be read
    (no state yet, the API refuses) is empty with `problem()` saying why."""

    @property
    def label(self) -> str:
        """Where the fleet is read from, as the fleet page says it."""

    @property
    def kubernetes(self) -> bool: ...

    @property
    def namespace(self) -> str:
        """The namespace shown (a local fleet's objects are all in `default`)."""

    @property
    def state_dir(self) -> Path | None:
        """The local state folder (None on Kubernetes)."""

    async def fleet(self) -> fleetview.Fleet: ...

    async def objects(self, kind: str | None = None) -> list[StoredObject]: ...

    async def find(self, kind: str, name: str) -> StoredObject | None: ...

    async def logs(self, name: str) -> fleetview.Logs | None: ...

    async def events(self, kind: str | None = None, name: str | None = None) -> list[timeline.Event]:
        """The timeline of one object, or of the whole fleet (kind and name None)."""

    async def registry_urls(self) -> list[str]:
        """The fleet's running MCPRegistry endpoints (searched by the catalogue page)."""

    async def pods(self, kind: str, name: str) -> list[fleetview.PodRow] | None:
        """A workload's pods on a cluster (None for a local fleet: its processes are in the log)."""


@dataclass
class LocalSource:
    """A local fleet's state folder, read-only (the same reads as `mcpfleet get / describe / logs`)."""

    folder: Path
    label_prefix: str = "State folder"

    @property
    def label(self) -> str:
        return f"{self.label_prefix}: {_shown(self.folder)}"

    @property
    def kubernetes(self) -> bool:
        return False

    @property
    def namespace(self) -> str:
        return "default"

    @property
    def state_dir(self) -> Path | None:
        return self.folder

    async def fleet(self) -> fleetview.Fleet:
        return await asyncio.to_thread(fleetview.read_fleet, self.folder)

    def _objects(self, kind: str | None = None) -> list[StoredObject]:
        if not (self.folder / DB_FILENAME).is_file():
            return []
        return read_objects(self.folder, kind)

    async def objects(self, kind: str | None = None) -> list[StoredObject]:
        return await asyncio.to_thread(self._objects, kind)

    async def find(self, kind: str, name: str) -> StoredObject | None:
        return await asyncio.to_thread(fleetview.find_object, self.folder, kind, name)

    async def logs(self, name: str) -> fleetview.Logs | None:
        return await asyncio.to_thread(fleetview.read_logs, self.folder, name)

    async def events(self, kind: str | None = None, name: str | None = None) -> list[timeline.Event]:
        found: list[timeline.Event] = []
        for obj in await self.objects(kind):
            if name is None or obj.name == name:
                found.extend(timeline.from_conditions(obj.kind, obj.name, obj.status))
        return timeline.newest_first(found)

    async def registry_urls(self) -> list[str]:
        # `catalogue.sources.gather` reads the state folder's registries itself.
        return []

    async def pods(self, kind: str, name: str) -> list[fleetview.PodRow] | None:
        return None


def _shown(path: Path) -> str:
    """A path as the person typed it when under the current folder (`.mcpfleet`), else in full."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
