"""A policy set that follows its files: a change applies to the next request, sessions stay.

Both platforms change the files under a running service: `mcpfleet up` replaces a rendered file
atomically, the kubelet swaps a mounted ConfigMap's `..data` symlink. `os.stat` (which follows the
symlink) for a new inode, mtime or size sees both; it is checked at most once a second, on the
request path (no task, nothing to stop). A file that is missing or invalid keeps the current
policies (logged); at start it is an error, so a service never serves without the policies it
was configured with.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mcpfleet.policy.config import AuthzConfigError, AuthzDocument, read_document, resolve

if TYPE_CHECKING:
    from mcpfleet.policy.cedar import Authorizer

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0

Stamp = tuple[int, int, int] | None


def stamp(path: Path) -> Stamp:
    """What identifies one version of a file (None while it is missing, e.g. mid-swap)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class PolicyEngine:
    """The current `Authorizer` of an authz document given inline or as a file (plus its `authzFile`).

    `authorizer()` is what the request path calls; it reloads when a followed file changed.
    """

    def __init__(
        self,
        document: AuthzDocument | None = None,
        *,
        path: str | Path | None = None,
        base_dir: Path | None = None,
        interval: float = CHECK_SECONDS,
    ) -> None:
        if (document is None) == (path is None):
            raise ValueError("give exactly one of document and path")
        self._document = document
        self._path = Path(path) if path is not None else None
        self._base_dir = base_dir if base_dir is not None else (self._path.parent if self._path else None)
        self.interval = interval
        self.reloads = 0
        self.last_error: str | None = None
        self._followed: dict[Path, Stamp] = {}
        self._current = self._build()  # raises AuthzConfigError: fail at start, never serve without
        self._next_check = time.monotonic() + interval

    def _build(self) -> Authorizer:
        followed: dict[Path, Stamp] = {}
        if self._path is not None:
            followed[self._path] = stamp(self._path)
            document = read_document(self._path)
            source = str(self._path)
        else:
            assert self._document is not None
            document, source = self._document, "authz"
        resolved, inner = resolve(document, self._base_dir, source)
        if inner is not None:
            followed[inner] = stamp(inner)
        from mcpfleet.policy.cedar import Authorizer  # cedarpy: only where authz is configured

        try:
            authorizer = Authorizer(resolved)
        except AuthzConfigError as exc:
            raise AuthzConfigError(f"{inner or source}: {exc}") from exc
        self._followed = followed
        return authorizer

    def authorizer(self) -> Authorizer:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + self.interval
            if any(stamp(path) != seen for path, seen in self._followed.items()):
                self.reload()
        return self._current

    def reload(self) -> bool:
        """Rebuild from the files now; keeps the current policies when they are invalid."""
        try:
            self._current = self._build()
        except AuthzConfigError as exc:
            self.last_error = str(exc)
            log.warning("authz config changed but was not applied (keeping the current policies): %s", exc)
            # Look again only when the file changes once more.
            self._followed = {path: stamp(path) for path in self._followed}
            return False
        self.last_error = None
        self.reloads += 1
        log.info("authz policies reloaded (%d policies)", len(self._current.policies))
        return True

    def replace(self, document: AuthzDocument) -> None:
        """Take a new inline document (the vMCP config re-read); raises AuthzConfigError when invalid."""
        previous = self._document
        self._document, self._path = document, None
        try:
            self._current = self._build()
        except AuthzConfigError:
            self._document = previous
            raise
        self.reloads += 1
