"""What every source reader provides: fetch the content, hash it, parse it only when it changed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mcpfleet.registry.entry import ParseResult
from mcpfleet.registry.errors import RegistryError
from mcpfleet.registry.formats import parse

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""Largest registry document read from a file, URL, git or ConfigMap source (10,000 entries take ~20 MB)."""


def too_large(size: int) -> SourceError:
    return SourceError(f"document is {size} bytes, more than the {MAX_DOCUMENT_BYTES // 2**20} MiB limit")


class SourceError(RegistryError):
    """Fetching a source failed; the message is safe to show (no credentials)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    content_hash: str
    parse: Callable[[], ParseResult]
    """Parsing is deferred so that an unchanged source costs one fetch and one hash."""


class SourceReader(Protocol):
    async def fetch(self) -> Fetched: ...

    async def close(self) -> None: ...


def fetched_bytes(source: str, fmt: str, content: bytes) -> Fetched:
    """A Fetched for sources that yield a registry file's bytes."""
    if len(content) > MAX_DOCUMENT_BYTES:
        raise too_large(len(content))
    return Fetched(hashlib.sha256(content).hexdigest(), lambda: parse(fmt, source, content))
