"""The AI clients mcpfleet configures: where each keeps its user-level MCP servers, in which
format, under which key, and the entry it understands for a streamable-HTTP server.

Every row was checked against the client's own documentation (the `source` of each row; also in
docs/clients.md). Paths are the user-level ones on Linux, and on macOS where they differ (chosen by
`Environment.platform`). "Found" means the row's `folder` exists: the client has run on this
machine. Headers (a bearer token for a protected gateway) go where each client takes them; Claude
Desktop launches only stdio servers, so it gets the `mcp-remote` bridge (npm), whose `--header`
takes the value from an environment variable of the entry (a value with a space does not survive
in `args` on every platform, the bridge's README says).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BRIDGE_PACKAGE = "mcp-remote"
"""The stdio <-> streamable HTTP bridge Claude Desktop runs (`npx -y mcp-remote URL`; on npm)."""


@dataclass(frozen=True)
class Environment:
    """Where the user's files are: HOME, the environment (XDG_CONFIG_HOME, CODEX_HOME) and the OS."""

    home: Path
    env: Mapping[str, str] = field(default_factory=dict)
    platform: str = "linux"

    @classmethod
    def current(cls) -> Environment:
        import sys

        return cls(Path(os.environ.get("HOME") or Path.home()), dict(os.environ), sys.platform)

    @property
    def mac(self) -> bool:
        return self.platform == "darwin"

    def config_home(self) -> Path:
        """$XDG_CONFIG_HOME (absolute), else ~/.config."""
        value = self.env.get("XDG_CONFIG_HOME", "")
        return Path(value) if os.path.isabs(value) else self.home / ".config"

    def app_support(self) -> Path:
        """Where Electron apps keep user data: ~/Library/Application Support on macOS, else the
        XDG config folder."""
        return self.home / "Library" / "Application Support" if self.mac else self.config_home()


@dataclass(frozen=True)
class Client:
    """One AI client's user-level MCP configuration."""

    id: str
    title: str
    format: str  # json, jsonc, toml, yaml
    key: tuple[str, ...]  # the path of keys to the servers, e.g. ("mcpServers",)
    folder: Callable[[Environment], Path]
    file: Callable[[Environment], Path]
    entry: Callable[[str, str, Mapping[str, str]], dict[str, Any]]  # (name, url, headers)
    url_of: Callable[[Mapping[str, Any]], str | None]
    source: str


def _field(name: str) -> Callable[[Mapping[str, Any]], str | None]:
    def url_of(entry: Mapping[str, Any]) -> str | None:
        value = entry.get(name)
        return value if isinstance(value, str) else None

    return url_of


def _with_headers(entry: dict[str, Any], headers: Mapping[str, str], key: str = "headers") -> dict[str, Any]:
    if headers:
        entry[key] = dict(headers)
    return entry


def _desktop_entry(name: str, url: str, headers: Mapping[str, str]) -> dict[str, Any]:
    args = ["-y", BRIDGE_PACKAGE, url]
    env: dict[str, str] = {}
    for number, (header, value) in enumerate(headers.items(), start=1):
        variable = f"MCPFLEET_HEADER_{number}"
        args += ["--header", f"{header}:${{{variable}}}"]
        env[variable] = value
    entry: dict[str, Any] = {"command": "npx", "args": args}
    if env:
        entry["env"] = env
    return entry


def _desktop_url(entry: Mapping[str, Any]) -> str | None:
    args = entry.get("args")
    if not isinstance(args, list) or BRIDGE_PACKAGE not in args:
        return None
    index = args.index(BRIDGE_PACKAGE) + 1
    return args[index] if index < len(args) and isinstance(args[index], str) else None


def _goose_entry(name: str, url: str, headers: Mapping[str, str]) -> dict[str, Any]:
    return {
        "type": "streamable_http",
        "name": name,
        "description": "mcpfleet gateway",
        "enabled": True,
        "uri": url,
        "headers": dict(headers),
        "envs": {},
        "env_keys": [],
        "timeout": 300,
    }


def _codex_home(e: Environment) -> Path:
    value = e.env.get("CODEX_HOME", "")
    return Path(value) if os.path.isabs(value) else e.home / ".codex"


def _vscode_user(e: Environment) -> Path:
    return e.app_support() / "Code" / "User"


CLIENTS: tuple[Client, ...] = (
    Client(
        # https://code.claude.com/docs/en/mcp (scopes: "user" servers are the top-level mcpServers of
        # ~/.claude.json; an http server is {"type": "http", "url", "headers"})
        id="claude-code",
        title="Claude Code",
        format="json",
        key=("mcpServers",),
        folder=lambda e: e.home / ".claude",
        file=lambda e: e.home / ".claude.json",
        entry=lambda name, url, headers: _with_headers({"type": "http", "url": url}, headers),
        url_of=_field("url"),
        source="https://code.claude.com/docs/en/mcp",
    ),
    Client(
        # https://modelcontextprotocol.io/quickstart/user (the file and its
        # mcpServers; stdio servers only) and https://www.npmjs.com/package/mcp-remote (the bridge,
        # `--header NAME:${VAR}` with VAR in env). Linux has no official build; community builds
        # use ~/.config/Claude.
        id="claude-desktop",
        title="Claude Desktop",
        format="json",
        key=("mcpServers",),
        folder=lambda e: e.app_support() / "Claude",
        file=lambda e: e.app_support() / "Claude" / "claude_desktop_config.json",
        entry=_desktop_entry,
        url_of=_desktop_url,
        source="https://modelcontextprotocol.io/quickstart/user",
    ),
    Client(
        # https://cursor.com/docs/mcp (global ~/.cursor/mcp.json; remote: "url", "headers")
        id="cursor",
        title="Cursor",
        format="json",
        key=("mcpServers",),
        folder=lambda e: e.home / ".cursor",
        file=lambda e: e.home / ".cursor" / "mcp.json",
        entry=lambda name, url, headers: _with_headers({"url": url}, headers),
        url_of=_field("url"),
        source="https://cursor.com/docs/mcp",
    ),
    Client(
        # https://code.visualstudio.com/docs/copilot/reference/mcp-configuration (mcp.json in the
        # user profile folder, top-level "servers", {"type": "http", "url", "headers"}; JSONC)
        id="vscode",
        title="VS Code",
        format="jsonc",
        key=("servers",),
        folder=lambda e: e.app_support() / "Code",
        file=lambda e: _vscode_user(e) / "mcp.json",
        entry=lambda name, url, headers: _with_headers({"type": "http", "url": url}, headers),
        url_of=_field("url"),
        source="https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
    ),
    Client(
        # https://docs.windsurf.com/windsurf/cascade/mcp (~/.codeium/windsurf/mcp_config.json;
        # remote: "serverUrl", "headers")
        id="windsurf",
        title="Windsurf",
        format="json",
        key=("mcpServers",),
        folder=lambda e: e.home / ".codeium" / "windsurf",
        file=lambda e: e.home / ".codeium" / "windsurf" / "mcp_config.json",
        entry=lambda name, url, headers: _with_headers({"serverUrl": url}, headers),
        url_of=_field("serverUrl"),
        source="https://docs.windsurf.com/windsurf/cascade/mcp",
    ),
    Client(
        # https://docs.cline.bot/mcp/connecting-to-a-remote-server ("type": "streamableHttp", "url",
        # "headers"); the file is in the VS Code extension's global storage (saoudrizwan.claude-dev)
        id="cline",
        title="Cline",
        format="json",
        key=("mcpServers",),
        folder=lambda e: _vscode_user(e) / "globalStorage" / "saoudrizwan.claude-dev",
        file=lambda e: (
            _vscode_user(e)
            / "globalStorage"
            / "saoudrizwan.claude-dev"
            / "settings"
            / "cline_mcp_settings.json"
        ),
        entry=lambda name, url, headers: _with_headers(
            {"type": "streamableHttp", "url": url, "disabled": False}, headers
        ),
        url_of=_field("url"),
        source="https://docs.cline.bot/mcp/connecting-to-a-remote-server",
    ),
    Client(
        # https://block.github.io/goose/docs/guides/config-files (~/.config/goose/config.yaml on
        # Linux and macOS; extensions keyed by name; type streamable_http with "uri", "headers")
        id="goose",
        title="Goose",
        format="yaml",
        key=("extensions",),
        folder=lambda e: (e.home / ".config" if e.mac else e.config_home()) / "goose",
        file=lambda e: (e.home / ".config" if e.mac else e.config_home()) / "goose" / "config.yaml",
        entry=_goose_entry,
        url_of=_field("uri"),
        source="https://block.github.io/goose/docs/guides/config-files",
    ),
    Client(
        # https://zed.dev/docs/ai/mcp (context_servers in settings.json; remote: "url", "headers")
        # and https://zed.dev/docs/configuring-zed (~/.config/zed/settings.json, also on macOS; JSONC)
        id="zed",
        title="Zed",
        format="jsonc",
        key=("context_servers",),
        folder=lambda e: (e.home / ".config" if e.mac else e.config_home()) / "zed",
        file=lambda e: (e.home / ".config" if e.mac else e.config_home()) / "zed" / "settings.json",
        entry=lambda name, url, headers: _with_headers({"url": url}, headers),
        url_of=_field("url"),
        source="https://zed.dev/docs/ai/mcp",
    ),
    Client(
        # https://developers.openai.com/codex/mcp ($CODEX_HOME or ~/.codex, config.toml,
        # [mcp_servers.NAME] with "url"; static headers in "http_headers")
        id="codex",
        title="Codex CLI",
        format="toml",
        key=("mcp_servers",),
        folder=_codex_home,
        file=lambda e: _codex_home(e) / "config.toml",
        entry=lambda name, url, headers: _with_headers({"url": url}, headers, key="http_headers"),
        url_of=_field("url"),
        source="https://developers.openai.com/codex/mcp",
    ),
    Client(
        # https://geminicli.com/docs/tools/mcp-server/ (~/.gemini/settings.json, mcpServers;
        # streamable HTTP is "httpUrl" — "url" means SSE — with "headers"); the CLI strips comments
        # from its settings files, so they are JSONC
        id="gemini",
        title="Gemini CLI",
        format="jsonc",
        key=("mcpServers",),
        folder=lambda e: e.home / ".gemini",
        file=lambda e: e.home / ".gemini" / "settings.json",
        entry=lambda name, url, headers: _with_headers({"httpUrl": url}, headers),
        url_of=_field("httpUrl"),
        source="https://geminicli.com/docs/tools/mcp-server/",
    ),
)

ALIASES = {
    "claude": "claude-code",
    "code": "vscode",
    "vs-code": "vscode",
    "codex-cli": "codex",
    "gemini-cli": "gemini",
}


def by_id(name: str) -> Client:
    """The client called `name` (an id or alias); KeyError naming the known ones."""
    wanted = ALIASES.get(name.lower(), name.lower())
    for client in CLIENTS:
        if client.id == wanted:
            return client
    raise KeyError(f"unknown client {name!r} (known: {', '.join(c.id for c in CLIENTS)})")
