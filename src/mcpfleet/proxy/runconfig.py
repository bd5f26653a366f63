"""The run config file (`runconfig.json`) of an MCPServer, as the proxy reads it (`--run-config`).

The control plane renders it (`reconcile/mcpserver.py` `run_config()`: the workload's ConfigMap on
Kubernetes, a file in the state dir locally). The proxy acts on `toolConfig` (the referenced
MCPToolConfig's spec): it enforces its filter and overrides (`mcpfleet.toolconfig`), and on
`rateLimiting` (with `sessionStorage` for Redis-shared buckets, `mcpfleet.ratelimit`). The other
keys describe what runs and are checked for shape only. The file is read once at start; a file
that is missing, not JSON or of the wrong shape stops the proxy with the offending field named.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcpfleet.api.mcptoolconfig import MCPToolConfigSpec
from mcpfleet.api.ratelimit import RateLimiting, SessionStorage
from mcpfleet.configfile import error_location
from mcpfleet.toolconfig import ToolPolicy, override_of


class RunConfigError(Exception):
    """The run config cannot be used; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class ToolConfigEntry(_Model):
    """`toolConfig`: the referenced MCPToolConfig, its hash and its spec."""

    name: str = Field(min_length=1)
    config_hash: str | None = Field(default=None, alias="configHash")
    spec: MCPToolConfigSpec = Field(default_factory=MCPToolConfigSpec)


class RunConfig(_Model):
    """The keys of `runconfig.json` the proxy knows (unknown keys are ignored)."""

    name: str | None = None
    namespace: str | None = None
    image: str | None = None
    transport: str | None = None
    proxy_mode: str | None = Field(default=None, alias="proxyMode")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list, alias="secretEnv")
    group_ref: str | None = Field(default=None, alias="groupRef")
    tool_config: ToolConfigEntry | None = Field(default=None, alias="toolConfig")
    rate_limiting: RateLimiting | None = Field(default=None, alias="rateLimiting")
    session_storage: SessionStorage | None = Field(default=None, alias="sessionStorage")

    def tool_policy(self) -> ToolPolicy | None:
        """The filter and overrides to enforce, or None when no MCPToolConfig is referenced."""
        if self.tool_config is None:
            return None
        spec = self.tool_config.spec
        overrides = {original: override_of(o) for original, o in spec.tools_override.items()}
        return ToolPolicy(allow=frozenset(spec.tools_filter), overrides=overrides)


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a run config file (raises RunConfigError naming the file and field)."""
    file = Path(path)
    try:
        data = orjson.loads(file.read_bytes())
    except OSError as exc:
        raise RunConfigError(f"{file}: cannot read the run config: {exc.strerror or exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise RunConfigError(f"{file}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RunConfigError(f"{file}: expected a JSON object, got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{error_location(e)}: {e['msg']}" for e in exc.errors())
        raise RunConfigError(f"{file}: {problems}") from exc
