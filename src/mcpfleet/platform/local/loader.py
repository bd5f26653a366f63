"""Loading a folder of manifests: every YAML document under DIR, validated by the api models.

The same pydantic models as the operator's CRDs validate each document. A bad document is reported
with its file, its document number in that file and each offending field, and never stops the
valid documents from running. Files are read within `yamlread.ManifestLimits` (size, count,
depth, alias expansion); a symlink is read only when it resolves inside DIR (a link to
`/proc/self/environ` or `~/.ssh` must not end up in an error message). When two documents define
the same object, the one from the file that already owns it (`owners`) wins, so adding a file can
never take over a running object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.api.resource import Resource
from mcpfleet.api.superseded import warnings as superseded_warnings
from mcpfleet.yamlread import (
    MAX_FILES_ENV,
    ManifestLimits,
    ManifestTooLarge,
    load_documents,
    read_text,
)

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class LoadError:
    """One document that could not be loaded."""

    file: str
    document: int | None
    """1-based index of the document in its file; None when the whole file is unreadable."""
    kind: str
    name: str
    problems: tuple[tuple[str, str], ...]
    """(field path, reason) pairs; the field path is empty for whole-document problems."""

    def __str__(self) -> str:
        where = self.file if self.document is None else f"{self.file} (document {self.document})"
        what = f" {self.kind}/{self.name}" if self.kind else ""
        detail = "; ".join(f"{path}: {reason}" if path else reason for path, reason in self.problems)
        return f"{where}{what}: {detail}"


@dataclass(frozen=True)
class Loaded:
    """A valid object and where it came from."""

    resource: Resource
    manifest: dict[str, Any]
    source: str
    """`file#document`, shown by `mcpfleet get -o yaml` as an annotation."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.resource.kind, self.resource.namespace, self.resource.name)

    @property
    def file(self) -> str:
        """The file part of `source` (as shown, relative to DIR)."""
        return self.source.rpartition("#")[0]


@dataclass
class LoadResult:
    objects: list[Loaded] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Valid documents that set a superseded field (`mcpfleet.api.superseded`), one line each."""


def yaml_reason(exc: yaml.YAMLError) -> str:
    """`line L, column C: problem` — the file is named by the LoadError, not PyYAML's `<unicode string>`."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        context = f" ({exc.context})" if exc.context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}{context}"
    return str(exc).replace("\n", " ")


SHOWN_CHARS = 253
"""Kind and name as echoed in an error are cut to this (they come from the hostile document); the
longest valid name fits, so an invalid new version still matches the running object by name."""
REASON_CHARS = 500


def _printable(text: str, limit: int = SHOWN_CHARS) -> str:
    """A value from a manifest made safe to print: control characters escaped, length bounded."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def manifest_files(root: Path) -> list[Path]:
    """YAML files under `root` (or `root` itself), in a stable order; hidden folders are skipped.

    Symlinked folders are not descended into (pathlib's rglob does not follow them); symlinked
    files are listed and checked by `load_dir`.
    """
    if root.is_file():
        return [root]
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue  # editor swap files, .git, a state dir inside DIR
        if path.is_file() and path.suffix in YAML_SUFFIXES:
            files.append(path)
    return files


def _file_error(shown: str, reason: str) -> LoadError:
    return LoadError(shown, None, "", "", (("", _printable(reason, REASON_CHARS)),))


def _read_documents(path: Path, inside: Path, limits: ManifestLimits) -> list[Any]:
    """The documents of one file, or ValueError/OSError with the reason it cannot be used."""
    if path.is_symlink() and not path.resolve().is_relative_to(inside):
        raise ValueError("a symlink to a file outside the manifests folder is not read")
    try:
        text = read_text(path, limits)
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text (a binary file?)") from None
    try:
        return load_documents(text, limits)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML: {yaml_reason(exc)}") from None
    except RecursionError:  # a limit above what the parser can take (the ceiling should prevent it)
        raise ManifestTooLarge("nested too deeply to parse") from None


def _superseded(loaded: Loaded, shown: str, index: int) -> list[str]:
    """The superseded fields a valid document sets, each as a line naming the document."""
    version = str(loaded.manifest["apiVersion"]).rpartition("/")[2]
    where = f"{shown} (document {index}) {loaded.key[0]}/{loaded.key[2]}"
    changes = type(loaded.resource).version_changes
    return [f"{where}: {warning}" for warning in superseded_warnings(loaded.manifest, changes, version)]


def load_dir(
    root: Path, limits: ManifestLimits | None = None, owners: Mapping[tuple[str, str, str], str] | None = None
) -> LoadResult:
    """Parse every document under `root`; invalid ones become LoadErrors, valid ones Loaded.

    `owners` maps an object already running to the file it came from: among duplicates that file's
    document wins, whatever the sort order; without an owner the first in sort order wins.
    """
    limits = limits or ManifestLimits()
    owners = owners or {}
    result = LoadResult()
    base = root if root.is_dir() else root.parent
    inside = base.resolve()
    candidates: dict[tuple[str, str, str], list[Loaded]] = {}
    in_order: list[Loaded] = []
    files = manifest_files(root)
    for skipped in files[limits.max_files :]:
        result.errors.append(
            _file_error(
                str(skipped.relative_to(base)),
                f"not read: more than {limits.max_files} manifest files (set ${MAX_FILES_ENV} to raise the limit)",
            )
        )
    for path in files[: limits.max_files]:
        shown = str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
        try:
            documents = _read_documents(path, inside, limits)
        except OSError as exc:
            result.errors.append(_file_error(shown, f"cannot read: {exc.strerror or exc}"))
            continue
        except ValueError as exc:  # ManifestTooLarge included
            result.errors.append(_file_error(shown, str(exc)))
            continue
        for index, document in enumerate(documents, start=1):
            if document is None:
                continue  # an empty document (a trailing ---) is not an error
            if not isinstance(document, dict):
                problem = (
                    "",
                    f"expected a mapping with apiVersion/kind/metadata/spec, got {type(document).__name__}",
                )
                result.errors.append(LoadError(shown, index, "", "", (problem,)))
                continue
            try:
                resource = parse_manifest(document)
            except ManifestError as exc:
                problems = tuple((p, _printable(r, REASON_CHARS)) for p, r in exc.problems)
                result.errors.append(
                    LoadError(shown, index, _printable(exc.kind), _printable(exc.name), problems)
                )
                continue
            loaded = Loaded(resource, document, f"{shown}#{index}")
            result.warnings += _superseded(loaded, shown, index)
            candidates.setdefault(loaded.key, []).append(loaded)
            in_order.append(loaded)
    winners: set[int] = set()
    for key, found in candidates.items():
        owner = owners.get(key)
        winner = next((c for c in found if c.file == owner), found[0])
        winners.add(id(winner))
        for loser in found:
            if loser is winner:
                continue
            problem = ("metadata.name", f"duplicate of {winner.source}; this document is ignored")
            kind, name = loser.resource.kind, loser.resource.name
            result.errors.append(
                LoadError(loser.file, int(loser.source.rpartition("#")[2]), kind, name, (problem,))
            )
    result.objects = [o for o in in_order if id(o) in winners]
    return result
