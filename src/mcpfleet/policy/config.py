"""The data-plane authorization config: one policy set, whatever it came from.

`AuthzDocument` is ToolHive's authz file format (`thv run --authz-config FILE`:
`{version, type: cedarv1, cedar: {policies, entities_json}}`) plus one mcpfleet key, `authzFile`:
the path of another such file (a mounted ConfigMap key) whose `cedar` block is used, while the
claim settings written here override the file's. Every source resolves to it: `authzConfig.inline`
and `authzConfig.configMap` (rendered by `reconcile/policy.py`), and an MCPAuthzConfig kind
later. The proxy reads it from `--authz-config`; the vMCP gateway from its config's `authz` key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from mcpfleet.api.policy import MAX_ENTITIES_CHARS, MAX_POLICIES, MAX_POLICY_CHARS
from mcpfleet.configfile import error_location, read_bounded

MAX_FILE_BYTES = 4 * 1_048_576


class AuthzConfigError(Exception):
    """The authz config cannot be used; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class _ClaimSettings(_Model):
    """Which token claims name the caller's groups, and the Cedar type of those groups."""

    group_claim_name: str | None = Field(
        default=None, validation_alias=AliasChoices("group_claim_name", "groupClaimName")
    )
    role_claim_name: str | None = Field(
        default=None, validation_alias=AliasChoices("role_claim_name", "roleClaimName")
    )
    group_entity_type: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        validation_alias=AliasChoices("group_entity_type", "groupEntityType"),
    )


class CedarConfig(_ClaimSettings):
    """`cedar`: the policies and the static entity store."""

    policies: list[str] = Field(min_length=1, max_length=MAX_POLICIES)
    entities_json: str = Field(
        default="[]",
        max_length=MAX_ENTITIES_CHARS,
        validation_alias=AliasChoices("entities_json", "entitiesJson"),
        serialization_alias="entities_json",
    )


class AuthzDocument(_ClaimSettings):
    """ToolHive's authz file, plus `authzFile` (see the module docstring)."""

    version: str = "1.0"
    type: Literal["cedarv1"] = "cedarv1"
    cedar: CedarConfig | None = None
    authz_file: str | None = Field(
        default=None,
        validation_alias=AliasChoices("authzFile", "authz_file"),
        serialization_alias="authzFile",
    )

    def wire(self) -> dict[str, Any]:
        """The file form (ToolHive's snake_case keys, `authzFile` as mcpfleet writes it)."""
        out: dict[str, Any] = {"version": self.version, "type": self.type}
        if self.cedar is not None:
            out["cedar"] = {"policies": list(self.cedar.policies), "entities_json": self.cedar.entities_json}
        if self.authz_file is not None:
            out["authzFile"] = self.authz_file
        for key in ("group_claim_name", "role_claim_name", "group_entity_type"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def parse_document(data: Any, source: str) -> AuthzDocument:
    """Validate a parsed authz document (raises AuthzConfigError naming `source` and the field)."""
    if not isinstance(data, dict):
        raise AuthzConfigError(f"{source}: expected a mapping, got {type(data).__name__}")
    if data.get("type") not in (None, "cedarv1"):
        raise AuthzConfigError(
            f"{source}: type: {data.get('type')!r} is not supported (only cedarv1: Cedar policies)"
        )
    try:
        document = AuthzDocument.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{error_location(e)}: {e['msg']}" for e in exc.errors())
        raise AuthzConfigError(f"{source}: {problems}") from exc
    if document.cedar is None and document.authz_file is None:
        raise AuthzConfigError(
            f"{source}: cedar: required (the policies), or authzFile naming a file with them"
        )
    if document.cedar is not None:
        for index, policy in enumerate(document.cedar.policies):
            if len(policy) > MAX_POLICY_CHARS:
                raise AuthzConfigError(
                    f"{source}: cedar.policies[{index}]: longer than {MAX_POLICY_CHARS} characters"
                )
    return document


def read_document(path: str | Path) -> AuthzDocument:
    """Read an authz file (JSON or YAML), bounded in size."""
    file = Path(path)
    raw = read_bounded(file, MAX_FILE_BYTES, "authz config", AuthzConfigError)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        import yaml  # only for a YAML file: PyYAML is not part of a gateway's start otherwise

        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise AuthzConfigError(f"{file}: neither JSON nor YAML: {exc}") from exc
    return parse_document(data, str(file))


def resolve(document: AuthzDocument, base_dir: Path | None, source: str) -> tuple[AuthzDocument, Path | None]:
    """The document with `authzFile` read in (its claim settings overridden by the outer ones), and the
    path of that file (to follow for changes), or None when the policies were inline."""
    if document.authz_file is None:
        return document, None
    path = Path(document.authz_file)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    inner = read_document(path)
    if inner.authz_file is not None:
        raise AuthzConfigError(f"{path}: authzFile: a referenced authz file cannot reference another")
    merged = inner.model_copy(
        update={
            key: getattr(document, key)
            for key in ("group_claim_name", "role_claim_name", "group_entity_type")
            if getattr(document, key) is not None
        }
    )
    if merged.cedar is None:
        raise AuthzConfigError(f"{source}: authzFile {path}: cedar: required")
    return merged, path
