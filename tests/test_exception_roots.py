"""Issue 28: a package's own exceptions share one root, so a caller can catch any of them at once,
and each keeps the built-in base callers already catch."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpfleet.platform.local.containers import ContainerError
from mcpfleet.platform.local.errors import LocalPlatformError
from mcpfleet.platform.local.issuer import IssuerError
from mcpfleet.platform.local.lock import LockHeld
from mcpfleet.platform.local.paths import PathEscapeError
from mcpfleet.platform.local.sandbox import SandboxError
from mcpfleet.platform.local.userfleet import FleetEditError
from mcpfleet.platform.local.volumes import VolumeError
from mcpfleet.registry.config import ConfigError, load_config
from mcpfleet.registry.errors import RegistryError
from mcpfleet.registry.sources.base import SourceError
from mcpfleet.registry.tokens import RegistryTokenError, SigningKeyError


@pytest.mark.parametrize(
    ("error", "root", "builtin"),
    [
        (ConfigError, RegistryError, Exception),
        (SourceError, RegistryError, Exception),
        (RegistryTokenError, RegistryError, Exception),
        (SigningKeyError, RegistryError, Exception),
        (ContainerError, LocalPlatformError, RuntimeError),
        (SandboxError, LocalPlatformError, RuntimeError),
        (PathEscapeError, LocalPlatformError, ValueError),
        (IssuerError, LocalPlatformError, ValueError),
        (FleetEditError, LocalPlatformError, ValueError),
        (VolumeError, LocalPlatformError, Exception),
        (LockHeld, LocalPlatformError, Exception),
    ],
)
def test_each_error_has_its_package_root_and_keeps_its_builtin_base(
    error: type[Exception], root: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(error, root) and issubclass(error, builtin)


def test_a_bad_registry_config_is_caught_as_a_registry_error(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="cannot read registry config"):
        load_config(tmp_path / "missing.yaml")
