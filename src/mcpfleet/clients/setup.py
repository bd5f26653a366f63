"""Plans and applies `client setup` / `client remove` for one client, and reads `client list`.

A plan is the file's text before and after: `--dry-run` shows it as a unified diff, otherwise
`apply` writes it (backup, atomic). Idempotent by construction: when the entry already equals the
one we would write, the plan changes nothing and nothing is written. Any file mcpfleet cannot read
or parse, or whose servers key has an unexpected shape, raises `ConfigFileError` naming the file.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.clients import files
from mcpfleet.clients.document import Document, FormatError
from mcpfleet.clients.files import ConfigFileError
from mcpfleet.clients.jsonfile import JsonDocument
from mcpfleet.clients.table import Client, Environment
from mcpfleet.clients.tomlfile import TomlDocument
from mcpfleet.clients.yamlfile import YamlDocument


@dataclass(frozen=True)
class Plan:
    client: Client
    path: Path
    before: str | None  # None: the file does not exist
    after: str
    secrets: tuple[str, ...] = ()  # header values in the old or new entry: never printed

    @property
    def changed(self) -> bool:
        return self.after != (self.before or "")

    def diff(self) -> str:
        """A unified diff of the change, with secret values replaced by `<redacted>`."""
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path),
        )
        text = "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        )
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "<redacted>")
        return text


@dataclass(frozen=True)
class Status:
    client: Client
    found: bool
    path: Path
    entry_url: str | None  # the URL our entry points at; None when there is no entry
    error: str | None = None


def found(client: Client, env: Environment) -> bool:
    return client.folder(env).is_dir()


def _document(client: Client, text: str | None) -> Document:
    if client.format == "toml":
        return TomlDocument(text, client.key)
    if client.format == "yaml":
        return YamlDocument(text, client.key)
    return JsonDocument(text, client.key, strict=client.format == "json")


@contextmanager
def _refusing(path: Path) -> Iterator[None]:
    """A format error (syntax, shape, a layout we cannot edit) as a refusal naming the file."""
    try:
        yield
    except FormatError as exc:
        raise ConfigFileError(path, str(exc)) from None


def _load(client: Client, env: Environment) -> tuple[Path, str | None, Document, Mapping[str, Any]]:
    path = client.file(env)
    text = files.read(path)
    with _refusing(path):
        document = _document(client, text)
        return path, text, document, document.servers() or {}


SECRET_KEYS = ("headers", "http_headers", "env")
"""Where an entry carries header values (Claude Desktop's bridge: in `env`)."""


def _secrets(entry: Any) -> tuple[str, ...]:
    if not isinstance(entry, Mapping):
        return ()
    found = [
        value
        for key in SECRET_KEYS
        if isinstance(entry.get(key), Mapping)
        for value in entry[key].values()
        if isinstance(value, str)
    ]
    return tuple(found)


def plan_setup(client: Client, env: Environment, name: str, url: str, headers: Mapping[str, str]) -> Plan:
    path, text, document, servers = _load(client, env)
    entry = client.entry(name, url, headers)
    existing = servers.get(name)
    secrets = (*headers.values(), *_secrets(existing))
    if isinstance(existing, Mapping):
        # Fields mcpfleet does not write (Cline's autoApprove, Goose's available_tools, ...) are the
        # user's or the client's: they do not make the entry differ, and an update keeps them.
        owned = set(client.entry(name, url, {"X": "x"}))
        if {k: v for k, v in existing.items() if k in owned} == entry:
            return Plan(client, path, text, text or "", secrets)
        entry = {**entry, **{k: v for k, v in existing.items() if k not in owned}}
    with _refusing(path):
        return Plan(client, path, text, document.with_entry(name, entry), secrets)


def plan_remove(client: Client, env: Environment, name: str) -> Plan:
    path, text, document, servers = _load(client, env)
    if name not in servers:
        return Plan(client, path, text, text or "")
    with _refusing(path):
        return Plan(client, path, text, document.without_entry(name), _secrets(servers[name]))


def apply(plan: Plan) -> Path | None:
    """Writes the plan's file (nothing when unchanged); the backup written, if one was."""
    if not plan.changed:
        return None
    return files.write(plan.path, plan.before, plan.after)


def status(client: Client, env: Environment, name: str) -> Status:
    path = client.file(env)
    try:
        _, _, _, servers = _load(client, env)
    except ConfigFileError as exc:
        return Status(client, found(client, env), path, None, exc.problem)
    entry: Any = servers.get(name)
    url = client.url_of(entry) if isinstance(entry, Mapping) else None
    if entry is not None and url is None:
        url = "?"
    return Status(client, found(client, env), path, url)
