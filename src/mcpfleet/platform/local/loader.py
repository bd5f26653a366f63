"""Loading a folder of manifests: every YAML document under DIR, validated by the api models.

The same pydantic models as the operator's CRDs validate each document. A bad document is reported
with its file, its document number in that file and each offending field, and never stops the
valid documents from running.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.api.resource import Resource

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


@dataclass
class LoadResult:
    objects: list[Loaded] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)


def yaml_reason(exc: yaml.YAMLError) -> str:
    """`line L, column C: problem` — the file is named by the LoadError, not PyYAML's `<unicode string>`."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        context = f" ({exc.context})" if exc.context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}{context}"
    return str(exc).replace("\n", " ")


def manifest_files(root: Path) -> list[Path]:
    """YAML files under `root` (or `root` itself), in a stable order; hidden folders are skipped."""
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


def load_dir(root: Path) -> LoadResult:
    """Parse every document under `root`; invalid ones become LoadErrors, valid ones Loaded."""
    result = LoadResult()
    seen: dict[tuple[str, str, str], str] = {}
    base = root if root.is_dir() else root.parent
    for path in manifest_files(root):
        shown = str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except (OSError, UnicodeDecodeError) as exc:
            result.errors.append(LoadError(shown, None, "", "", (("", f"cannot read: {exc}"),)))
            continue
        except yaml.YAMLError as exc:
            reason = yaml_reason(exc)
            result.errors.append(LoadError(shown, None, "", "", (("", f"not valid YAML: {reason}"),)))
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
                result.errors.append(LoadError(shown, index, exc.kind, exc.name, tuple(exc.problems)))
                continue
            loaded = Loaded(resource, document, f"{shown}#{index}")
            if loaded.key in seen:
                problem = ("metadata.name", f"duplicate of {seen[loaded.key]}; this document is ignored")
                result.errors.append(LoadError(shown, index, resource.kind, resource.name, (problem,)))
                continue
            seen[loaded.key] = loaded.source
            result.objects.append(loaded)
    return result
