"""EmbeddingServer: an embedding inference server (HuggingFace TEI by default) the gateway's optimizer uses.

On Kubernetes the image runs as a Deployment + Service (`status.url` is the in-cluster URL, an
OpenAI-compatible / TEI `/embed` endpoint). Locally, `image` must name a package (`uvx://` / `npx://`)
run as a process; a container image is refused naming `spec.image`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from mcpfleet.api.common import QUANTITY_PATTERN, EnvVar, ResourceRequirements
from mcpfleet.api.mcpserver import IMAGE_PATTERN, refuse_option_like_image
from mcpfleet.api.meta import WORKLOAD_COLUMNS, ApiModel, Condition, KindInfo, PrinterColumn, SecretKeyRef
from mcpfleet.api.resource import Resource

DEFAULT_IMAGE = "ghcr.io/huggingface/text-embeddings-inference:cpu-latest"
DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
BUILTIN_IMAGE = "mcpfleet://embeddings"
EMBEDDING_IMAGE_PATTERN = "^(mcpfleet://embeddings|" + IMAGE_PATTERN.removeprefix("^(")
"""An MCPServer image (never starting with `-`), or mcpfleet's own embedding server."""
"""`spec.image` of mcpfleet's own embedding server (`mcpfleet embeddings serve`, a model shipped in a
PyPI package): a process locally, the mcpfleet image on Kubernetes; nothing is downloaded."""
FREE_FORM: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}


class ModelCache(ApiModel):
    """A PersistentVolumeClaim that keeps downloaded models across restarts."""

    enabled: bool = True
    """Keep models in a PVC (else in an emptyDir, downloaded at every start)."""
    size: str = Field(default="10Gi", pattern=QUANTITY_PATTERN)
    """Size of the claim."""
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"] = "ReadWriteOnce"
    """Access mode of the claim."""
    storage_class_name: str | None = Field(default=None, max_length=253)
    """StorageClass of the claim; the cluster default when unset."""


class MetadataOverrides(ApiModel):
    """Extra labels and annotations for one rendered object."""

    labels: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Labels added (mcpfleet's own labels win)."""
    annotations: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Annotations added."""


class WorkloadOverrides(MetadataOverrides):
    """Extra metadata for the Deployment and its pods."""

    pod_template_metadata_overrides: MetadataOverrides | None = None
    """Labels and annotations for the pods."""


class EmbeddingResourceOverrides(ApiModel):
    """Labels / annotations added to what is rendered."""

    deployment: WorkloadOverrides | None = None
    """The Deployment and its pod template."""
    stateful_set: WorkloadOverrides | None = None
    """ToolHive's name for the same workload object (applied to the Deployment)."""
    service: MetadataOverrides | None = None
    """The Service."""
    persistent_volume_claim: MetadataOverrides | None = None
    """The model cache claim."""


class EmbeddingServerSpec(ApiModel):
    """What embedding server to run."""

    image: Annotated[str, BeforeValidator(refuse_option_like_image)] = Field(
        default=DEFAULT_IMAGE, min_length=1, max_length=1024, pattern=EMBEDDING_IMAGE_PATTERN
    )
    """Container image (Kubernetes), `uvx://pkg` / `npx://pkg` (both platforms), or `mcpfleet://embeddings`:
    mcpfleet's own server with a bundled model (both platforms, nothing downloaded); never starting with `-`."""
    image_pull_policy: Literal["Always", "Never", "IfNotPresent"] = "IfNotPresent"
    """When the image is pulled."""
    model: str = Field(default=DEFAULT_MODEL, min_length=1, max_length=512, pattern=r"^[^\s]+$")
    """HuggingFace model id (passed as MODEL_ID / --model-id); with `mcpfleet://embeddings`, one of its
    bundled models (the default id here means its default model)."""
    port: int = Field(default=8080, ge=1, le=65535)
    """Port the server listens on."""
    replicas: int = Field(default=1, ge=1, le=100)
    """Replicas."""
    args: list[str] = Field(default_factory=list, max_length=100)
    """Extra arguments of the server."""
    env: list[EnvVar] = Field(default_factory=list, max_length=100)
    """Environment variables."""
    hf_token_secret_ref: SecretKeyRef | None = None
    """Secret key holding a HuggingFace token (HF_TOKEN, secretKeyRef env)."""
    model_cache: ModelCache | None = None
    """Persistent model cache."""
    resources: ResourceRequirements | None = None
    """CPU and memory of the server container."""
    pod_template_spec: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """A PodTemplateSpec merged onto the rendered pod (the server's container is named `embedding`)."""
    resource_overrides: EmbeddingResourceOverrides | None = None
    """Labels and annotations added to the rendered objects."""


class EmbeddingServerStatus(ApiModel):
    """Observed state of the embedding server."""

    phase: Literal["Pending", "Downloading", "Ready", "Failed", "Terminating"] | None = None
    """Pending, Downloading, Ready, Failed or Terminating."""
    message: str | None = None
    """Why it is in this phase."""
    url: str | None = None
    """Base URL of the embedding API (POST /embed, OpenAI-compatible /v1/embeddings); set while Ready."""
    ready_replicas: int | None = Field(default=None, ge=0)
    """Replicas passing their readiness check."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions, among them Ready."""


class EmbeddingServer(Resource):
    """An embedding inference server."""

    info: ClassVar[KindInfo] = KindInfo(
        "EmbeddingServer",
        "embeddingservers",
        ("emb", "embedding"),
        columns=(*WORKLOAD_COLUMNS[:4], PrinterColumn("Model", ".spec.model"), WORKLOAD_COLUMNS[4]),
    )
    kind: Literal["EmbeddingServer"] = "EmbeddingServer"
    spec: EmbeddingServerSpec = Field(default_factory=EmbeddingServerSpec)
    status: EmbeddingServerStatus = Field(default_factory=EmbeddingServerStatus)
