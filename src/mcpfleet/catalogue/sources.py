"""Where catalogue entries come from: the bundled catalogue, catalogue files, and registries that
speak the official MCP registry API (`GET /v0.1/servers`).

The registries a person has are: those of a running `mcpfleet up` (the MCPRegistry objects of its
state folder that have a URL), those listed in `registries.yaml` of the user's configuration folder,
and any given with `--registry`. A registry that cannot be reached, or answers something other than
a server list, is reported and skipped: the other sources still answer. Answers are bounded in size
and time, asked for uncompressed (so the size bound holds on the wire and decoded), and every entry
is validated against the server.json schema before it is used.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from mcpfleet.catalogue.entries import (
    MAX_CATALOGUE_BYTES,
    CatalogueEntry,
    CatalogueError,
    bundled,
    from_content,
    from_file,
)
from mcpfleet.httplimits import BodyTooLarge, read_capped
from mcpfleet.redact import redact_url

REGISTRY_TIMEOUT = 10.0
"""Seconds a registry has to answer one request."""
PAGE_LIMIT = 100
"""Servers asked for in one search request (the official registry's own maximum)."""
MAX_REGISTRIES = 32
"""Registries read at most: the user list and the flags together."""
REGISTRIES_FILE = "registries.yaml"


@dataclass
class Catalogue:
    """Entries of every source read, and one line per source or entry that was skipped."""

    entries: list[CatalogueEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def config_dir() -> Path:
    """`$XDG_CONFIG_HOME/mcpfleet`, else `~/.config/mcpfleet`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mcpfleet"


def user_registries(problems: list[str]) -> list[str]:
    """Registry URLs listed in the user's `registries.yaml` (`registries: [{name, url}]` or plain URLs)."""
    import yaml

    from mcpfleet.yamlread import ManifestLimits, ManifestTooLarge, load_documents, read_text

    path = config_dir() / REGISTRIES_FILE
    if not path.is_file():
        return []
    limits = ManifestLimits(max_file_bytes=256 * 1024, max_depth=10, max_nodes=2000)
    try:
        documents = load_documents(read_text(path, limits), limits)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ManifestTooLarge) as exc:
        problems.append(f"{path}: {exc}")
        return []
    document = documents[0] if len(documents) == 1 else None
    items = document.get("registries") if isinstance(document, dict) else None
    if not isinstance(items, list):
        problems.append(f"{path}: expected `registries:` with a list of URLs or {{name, url}}")
        return []
    urls: list[str] = []
    for index, item in enumerate(items):
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and url.startswith(("http://", "https://")) and len(url) <= 2048:
            urls.append(url)
        else:
            problems.append(f"{path}: registries[{index}].url: expected an http(s) URL")
    return urls


def running_registries(state_dir: Path) -> list[str]:
    """URLs of the MCPRegistry objects of a local fleet's state folder that currently have one."""
    from mcpfleet.platform.local.snapshot import DB_FILENAME

    db = state_dir / DB_FILENAME
    if not db.is_file():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2) as connection:
            rows = connection.execute(
                "SELECT status FROM objects WHERE kind = 'MCPRegistry' ORDER BY name"
            ).fetchall()
    except sqlite3.Error:
        return []
    urls: list[str] = []
    for (status,) in rows:
        try:
            url = json.loads(status).get("url")
        except (ValueError, AttributeError):
            continue
        if isinstance(url, str) and url.startswith("http"):
            urls.append(url)
    return urls


async def _registry_entries(
    client: httpx.AsyncClient, url: str, term: str
) -> tuple[list[CatalogueEntry], list[str]]:
    base = url.rstrip("/").removesuffix("/v0.1/servers").removesuffix("/v0/servers")
    params: dict[str, str | int] = {"version": "latest", "limit": PAGE_LIMIT}
    if term.strip():
        params["search"] = term.strip()[:200]
    shown = redact_url(base)
    try:
        async with client.stream("GET", f"{base}/v0.1/servers", params=params) as response:
            if response.status_code != 200:
                return [], [f"{shown}: HTTP {response.status_code}"]
            content = await read_capped(response, MAX_CATALOGUE_BYTES)
    except BodyTooLarge:
        return [], [f"{shown}: answer larger than {MAX_CATALOGUE_BYTES} bytes"]
    except httpx.HTTPError as exc:
        return [], [f"{shown}: not reachable ({type(exc).__name__})"]
    try:
        return from_content(shown, content)
    except CatalogueError as exc:
        return [], [str(exc)]


async def _registries(urls: list[str], term: str) -> Catalogue:
    found = Catalogue()
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    async with httpx.AsyncClient(timeout=REGISTRY_TIMEOUT, headers=headers) as client:
        answers = await asyncio.gather(*(_registry_entries(client, url, term) for url in urls))
    for entries, problems in answers:
        found.entries.extend(entries)
        found.problems.extend(problems)
    return found


def gather(
    term: str,
    registries: list[str],
    files: list[Path],
    state_dir: Path | None,
    include_bundled: bool = True,
) -> Catalogue:
    """Every entry the person's sources offer for `term` (registries are asked to search; files
    and the bundled catalogue are searched here), in source order: running fleet, user list,
    flags, files, bundled."""
    catalogue = Catalogue()
    urls: list[str] = []
    if state_dir is not None:
        urls.extend(running_registries(state_dir))
    urls.extend(user_registries(catalogue.problems))
    urls.extend(registries)
    urls = list(dict.fromkeys(urls))
    if len(urls) > MAX_REGISTRIES:
        catalogue.problems.append(f"only the first {MAX_REGISTRIES} registries are read")
        urls = urls[:MAX_REGISTRIES]
    if urls:
        remote = asyncio.run(_registries(urls, term))
        catalogue.entries.extend(remote.entries)
        catalogue.problems.extend(remote.problems)
    for path in files:
        try:
            entries, problems = from_file(path)
        except CatalogueError as exc:
            catalogue.problems.append(str(exc))
            continue
        catalogue.entries.extend(entries)
        catalogue.problems.extend(problems)
    if include_bundled:
        catalogue.entries.extend(bundled())
    return catalogue
