"""MCPServer `spec.volumes`: ToolHive's host-path volumes mounted into the MCP server's container.

ToolHive's shape: `{name, hostPath, mountPath, readOnly}`, every volume a folder (or file) of the host
shown at `mountPath` inside the server. Both paths obey the rule of permission-profile paths
(`permissions.check_grant_path`): absolute, no `.`, `..` or `//`, no control characters, never `/`
nor a kernel interface (`/proc`, `/sys`, `/dev`). The same rule is CEL in the CRD.

What each platform makes of them: Kubernetes, a `hostPath` pod volume mounted into the container that
runs the server (`render/objects.py`); locally, a bind into the server's bubblewrap sandbox or its
container (`platform/local/sandbox.py`, `containers.py`), read-only unless `readOnly: false` is
written (a host folder on the user's own machine is opened for writing only when asked).
"""

from __future__ import annotations

from pydantic import Field

from mcpfleet.api.meta import Rule, RuleModel
from mcpfleet.api.permissions import MAX_PATH, check_grant_path

MAX_VOLUMES = 32
# Printable, absolute: the CRD's first line of defence; the CEL below refuses the rest.
PATH_PATTERN = r"^/[^\x00-\x1f\x7f]*$"


def _path_cel(field: str) -> str:
    return (
        f"!{field}.matches('(^|/)[.][.]?(/|$)') && !{field}.contains('//') && {field} != '/'"
        f" && !{field}.matches('^/(proc|sys|dev)(/|$)')"
    )


def _grantable(path: str) -> bool:
    try:
        check_grant_path(path)
    except ValueError:
        return False
    return True


def _why(path: str) -> str:
    try:
        check_grant_path(path)
    except ValueError as exc:
        return str(exc)
    return ""


_PATH_MESSAGE = "must be a normal absolute path (no '.', '..' or '//'), not '/' nor under /proc, /sys or /dev"


class HostVolume(RuleModel):
    """A host path mounted into the MCP server's container (ToolHive's `Volume`)."""

    rules = (
        Rule(
            cel=_path_cel("self.hostPath"),
            message=f"hostPath {_PATH_MESSAGE}",
            field_path=".hostPath",
            check=lambda v: _grantable(v.host_path),
            detail=lambda v: f"hostPath {_why(v.host_path)}",
        ),
        Rule(
            cel=_path_cel("self.mountPath"),
            message=f"mountPath {_PATH_MESSAGE}",
            field_path=".mountPath",
            check=lambda v: _grantable(v.mount_path),
            detail=lambda v: f"mountPath {_why(v.mount_path)}",
        ),
    )

    name: str = Field(min_length=1, max_length=58, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Name of the volume (a DNS label; the pod volume is `host-NAME`)."""
    host_path: str = Field(min_length=1, max_length=MAX_PATH, pattern=PATH_PATTERN)
    """Path on the host (the node on Kubernetes, this machine locally) to mount."""
    mount_path: str = Field(min_length=1, max_length=MAX_PATH, pattern=PATH_PATTERN)
    """Path inside the server's container (locally: inside its sandbox) where the host path appears."""
    read_only: bool | None = None
    """Mount read-only. Kubernetes: unset is false (ToolHive's default); locally unset is read-only,
    and only `readOnly: false` makes the folder writable from the server."""

    def local_read_only(self) -> bool:
        """Read-only on the local platform: unless `readOnly: false` is written."""
        return self.read_only is not False


UNIQUE_MOUNT_PATHS = Rule(
    cel="!has(self.volumes) || self.volumes.all(v, self.volumes.exists_one(w, w.mountPath == v.mountPath))",
    message="volumes: each mountPath at most once",
    field_path=".volumes",
    check=lambda s: s.volumes is None or len({v.mount_path for v in s.volumes}) == len(s.volumes),
)
UNIQUE_NAMES = Rule(
    # The CRD's list-map on `name` refuses duplicates too; this says it in the same words on both platforms.
    cel="!has(self.volumes) || self.volumes.all(v, self.volumes.exists_one(w, w.name == v.name))",
    message="volumes: each name at most once",
    field_path=".volumes",
    check=lambda s: s.volumes is None or len({v.name for v in s.volumes}) == len(s.volumes),
)
