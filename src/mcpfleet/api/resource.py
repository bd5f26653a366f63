"""The envelope shared by every kind: apiVersion, kind, metadata, spec, status."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcpfleet.api.meta import KindInfo, ObjectMeta
from mcpfleet.api.versions import Change


class Resource(BaseModel):
    """A manifest of one mcpfleet kind. Subclasses pin `kind`, `spec` and `status`."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    info: ClassVar[KindInfo]
    KIND: ClassVar[str]
    """The kind's name (`info.kind`): what code outside `api/` compares a `kind` with, never a literal."""
    version_changes: ClassVar[tuple[Change, ...]] = ()
    """How newer served versions differ from this model's (hub) shape; see mcpfleet.api.versions.
    Empty (the default) means the kind has the same shape in every version."""

    api_version: Literal["mcpfleet.dev/v1alpha1"] = Field(default="mcpfleet.dev/v1alpha1", alias="apiVersion")
    kind: str
    metadata: ObjectMeta

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "info" in cls.__dict__:
            cls.KIND = cls.info.kind

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def generation(self) -> int:
        return self.metadata.generation

    def dump(self) -> dict[str, Any]:
        """The manifest as it goes on the wire (camelCase, unset fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
