"""The vMCP gateway's configuration: what `VirtualMCPServer.spec.config` and the gateway's config file share.

`GatewayConfig` and its parts (aggregation, composite tools, operational settings, optimizer, code
mode, rate limiting, audit, passthrough headers): the models, defaults and rules the gateway reads
its config file with (`mcpfleet.vmcp.config.VMCPConfig`), kept apart from the VirtualMCPServer
kind (`mcpfleet.api.virtualmcpserver`, which re-exports them) so that a gateway's start builds only
these models, not the kind's spec, status and the other kinds they reference (issue 19).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, ValidationInfo, field_validator, model_validator

from mcpfleet.api.duration import Duration, parse_duration
from mcpfleet.api.mcptoolconfig import ToolOverride
from mcpfleet.api.meta import ApiModel, HttpTransport, LocalObjectReference, RefersTo, Rule, RuleModel
from mcpfleet.api.policy import AuditConfig
from mcpfleet.api.ratelimit import RateLimiting

FREE_FORM: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}


class ConflictResolutionConfig(ApiModel):
    """Settings of the conflict resolution strategies."""

    prefix_format: str = Field(default="{workload}_", pattern=r".*\{workload\}.*")
    """Prefix for tool names under the prefix strategy (and for unlisted backends under priority)."""
    priority_order: list[str] = Field(default_factory=list)
    """Backends in order of precedence, for the priority strategy."""


class WorkloadToolConfig(ApiModel):
    """Tool filtering and renaming for one backend, as in MCPToolConfig."""

    workload: str = Field(min_length=1)
    """Backend (MCPServer or MCPRemoteProxy name) these settings apply to."""
    filter: list[str] = Field(default_factory=list)
    """Original tool names to keep; all when unset."""
    overrides: dict[str, ToolOverride] = Field(default_factory=dict, max_length=200)
    """New names / descriptions keyed by original tool name."""
    exclude_all: bool = False
    """Hide every tool of this backend from clients (composite tools can still call them)."""
    tool_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPToolConfig")] = None
    """MCPToolConfig to apply to this backend."""


class Aggregation(RuleModel):
    """How the backends' capabilities are merged into one list."""

    rules = (
        Rule(
            cel="self.conflictResolution != 'priority' || (has(self.conflictResolutionConfig) && "
            "has(self.conflictResolutionConfig.priorityOrder) && size(self.conflictResolutionConfig.priorityOrder) > 0)",
            message="the priority strategy needs conflictResolutionConfig.priorityOrder",
            field_path=".conflictResolutionConfig",
            check=lambda s: (
                s.conflict_resolution != "priority" or bool(s.conflict_resolution_config.priority_order)
            ),
        ),
    )

    conflict_resolution: Literal["prefix", "priority", "manual"] = "prefix"
    """prefix: every tool gets its backend's prefix; priority: the first backend in priorityOrder keeps
    the name; manual: every conflict must be resolved by an override."""
    conflict_resolution_config: ConflictResolutionConfig = Field(default_factory=ConflictResolutionConfig)
    """Settings of the chosen strategy."""
    exclude_all_tools: bool = False
    """Advertise no backend tools (only composite tools)."""
    default_tool_visibility: Literal["allow", "deny"] = "allow"
    """Tools of a backend with no `tools` entry: allow advertises them (a backend added to the group
    is exposed at once); deny advertises none, so only the backends listed in `tools` show tools.
    Advertising only: hidden tools stay callable by composite steps. Resources and prompts are
    not gated."""
    tools: list[WorkloadToolConfig] = Field(default_factory=list, max_length=100)
    """Per-backend filters and overrides."""


RESERVED_BACKEND_METADATA = ("group", "kind")
"""`backends[].metadata` keys the platforms set themselves (a value given for them is replaced)."""


class StaticBackend(RuleModel):
    """A backend given by URL rather than discovered from the group."""

    rules = (
        Rule(
            cel="!has(self.caBundlePath) || (has(self.type) && self.type == 'entry')",
            message="caBundlePath is only valid when type is 'entry'",
            field_path=".caBundlePath",
            check=lambda s: s.ca_bundle_path is None or s.type == "entry",
        ),
    )

    name: str = Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$")
    """Backend name (used in prefixes and routing)."""
    url: str = Field(pattern=r"^https?://")
    """MCP endpoint of the backend."""
    transport: HttpTransport = "streamable-http"
    """streamable-http or sse."""
    type: Literal["entry", ""] = ""
    """entry: a remote MCP server the gateway reaches directly (as an MCPServerEntry), which may
    carry caBundlePath; empty: a proxy or server of the fleet."""
    ca_bundle_path: str | None = Field(default=None, min_length=1, max_length=4096)
    """PEM CA bundle (a file the gateway can read: in its pod, a mounted volume) that verifies this
    backend's TLS certificate, instead of the system's CAs. Only with type entry."""
    metadata: dict[Annotated[str, Field(max_length=253)], Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict, max_length=64
    )
    """Free key-value labels of the backend (env, region, ...), shown with it in the gateway's
    /status; the keys group and kind are set by mcpfleet (group: the gateway's group, kind: where the
    backend came from)."""


class StepOnError(ApiModel):
    """What a failing step does."""

    action: Literal["abort", "continue", "retry"] = "abort"
    """abort the tool, continue with the other steps, or retry the step."""
    retry_count: int = Field(default=0, ge=0, le=10)
    """Retries for action retry."""
    max_retries: int | None = Field(default=None, ge=0, le=10)
    """Another name of `retryCount` (ToolHive's examples write it); the larger of the two counts."""
    retry_delay: Duration | None = None
    """Delay between retries."""

    @property
    def retries(self) -> int:
        return max(self.retry_count, self.max_retries or 0)


class ElicitationResponse(ApiModel):
    """What an elicitation step does when the user declines or cancels."""

    action: Literal["skip_remaining", "abort", "continue"] = "abort"
    """skip_remaining: end the tool successfully without the remaining steps; abort: fail the tool;
    continue: go on (the step's output is `defaultResults`, or `{"action": ...}`)."""


MAX_FOREACH_ITERATIONS = 1000
MAX_FOREACH_PARALLEL = 50
DEFAULT_FOREACH_ITERATIONS = 100
DEFAULT_FOREACH_PARALLEL = 10


class ForEachInnerStep(ApiModel):
    """The step a forEach step runs once per item: a tool call (no nested forEach, no elicitation)."""

    type: Literal["tool"] = "tool"
    """Only tool steps run inside forEach."""
    tool: str = Field(min_length=1, max_length=256)
    """Tool to call, as in a tool step."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments; templates may read {{.forEach.item}} (or the itemVar name) and {{.forEach.index}}."""
    timeout: Duration | None = None
    """Time limit of each call."""
    on_error: StepOnError = Field(default_factory=StepOnError)
    """Per item: abort (the item fails), continue (recorded as failed) or retry."""


class WorkflowStep(RuleModel):
    """One step of a composite tool: a call to a backend tool, or a question to the user (elicitation)."""

    rules = (
        Rule(
            cel="self.type != 'tool' || (has(self.tool) && size(self.tool) > 0)",
            message="a tool step needs tool",
            field_path=".tool",
            check=lambda s: s.type != "tool" or bool(s.tool),
        ),
        Rule(
            cel="self.type != 'elicitation' || (has(self.message) && size(self.message) > 0)",
            message="an elicitation step needs message",
            field_path=".message",
            check=lambda s: s.type != "elicitation" or bool(s.message),
        ),
        Rule(
            cel="self.type != 'forEach' || (has(self.collection) && size(self.collection) > 0)",
            message="a forEach step needs collection",
            field_path=".collection",
            check=lambda s: s.type != "forEach" or bool(s.collection),
        ),
        Rule(
            cel="self.type != 'forEach' || has(self.step)",
            message="a forEach step needs step (the tool step run for each item)",
            field_path=".step",
            check=lambda s: s.type != "forEach" or s.step is not None,
        ),
        Rule(
            cel="self.type == 'forEach' || (!has(self.collection) && !has(self.step))",
            message="collection and step apply to forEach steps only",
            field_path=".step",
            check=lambda s: s.type == "forEach" or (s.collection is None and s.step is None),
        ),
        Rule(
            cel="self.type == 'elicitation' || (!has(self.onDecline) && !has(self.onCancel))",
            message="onDecline and onCancel apply to elicitation steps only",
            field_path=".onDecline",
            check=lambda s: s.type == "elicitation" or (s.on_decline is None and s.on_cancel is None),
        ),
    )

    id: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Step id, unique in the tool; later steps read its output as {{.steps.ID.output}}."""
    type: Literal["tool", "elicitation", "forEach"] = "tool"
    """tool (call a backend tool), elicitation (ask the client's user) or forEach (call a tool once
    per item of a collection)."""
    tool: str | None = Field(default=None, min_length=1, max_length=256)
    """Tool to call, as the aggregated name (backend prefix included) or `backend.tool`."""
    arguments: dict[str, Any] = Field(default_factory=dict, json_schema_extra=FREE_FORM)
    """Arguments; strings may hold templates such as {{.params.x}} and {{.steps.id.output.text}}."""
    message: str | None = Field(default=None, max_length=4096)
    """Question shown to the user (elicitation); may hold templates."""
    schema_: dict[str, Any] | None = Field(default=None, alias="schema", json_schema_extra=FREE_FORM)
    """JSON Schema of the answer (elicitation): an object of primitive properties, as MCP requires."""
    on_decline: ElicitationResponse | None = None
    """What happens when the user declines (elicitation; abort when unset)."""
    on_cancel: ElicitationResponse | None = None
    """What happens when the user cancels (elicitation; abort when unset)."""
    depends_on: list[Annotated[str, Field(max_length=63)]] = Field(default_factory=list, max_length=10)
    """Steps that must finish first; steps without a dependency between them run in parallel."""
    condition: str | None = None
    """A template; the step runs only when it renders to a true value."""
    on_error: StepOnError = Field(default_factory=StepOnError)
    """What to do when the step fails."""
    timeout: Duration | None = None
    """Time limit of the step."""
    default_results: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """Output the step gives when it is skipped (condition false) or fails under action continue."""
    collection: str | None = Field(default=None, max_length=4096)
    """forEach: a template rendering to a list (or to a JSON text of one), e.g. {{.steps.ID.output.items}}."""
    item_var: str | None = Field(
        default=None,
        max_length=63,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": "self != 'index'", "message": "index is reserved"}]
        },
    )
    """forEach: the name the inner step reads the current item by, {{.forEach.NAME}} (default item;
    {{.forEach.index}} is the item's position)."""
    max_iterations: int | None = Field(default=None, ge=0, le=MAX_FOREACH_ITERATIONS)
    """forEach: most items (default 100, at most 1000); a longer collection fails the step."""
    max_parallel: int | None = Field(default=None, ge=0, le=MAX_FOREACH_PARALLEL)
    """forEach: iterations running at once (default 10, at most 50)."""
    step: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """forEach: the tool step run per item (`tool`, `arguments`, `timeout`, `onError`; templates may
    read {{.forEach.item}} and {{.forEach.index}})."""

    @field_validator("item_var")
    @classmethod
    def _not_index(cls, value: str | None) -> str | None:
        if value == "index":
            raise ValueError("index is reserved")
        return value

    @field_validator("step")
    @classmethod
    def _inner_step(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            ForEachInnerStep.model_validate(value)  # errors name .step.<field>
        return value

    @property
    def inner(self) -> ForEachInnerStep:
        """The forEach step's inner tool step (validated when the model was)."""
        assert self.step is not None
        return ForEachInnerStep.model_validate(self.step)


OutputType = Literal["string", "integer", "number", "boolean", "object", "array"]
MAX_OUTPUT_DEPTH = 8
"""How deep `properties` of object output properties may nest."""


class OutputProperty(RuleModel):
    """One property of a composite tool's structured output (ToolHive's OutputProperty)."""

    rules = (
        Rule(
            cel="self.type == 'object' || has(self.value)",
            message="a property of a type other than object needs value",
            field_path=".value",
            check=lambda s: s.type == "object" or s.value is not None,
        ),
        Rule(
            cel="self.type != 'object' || (has(self.value) != has(self.properties))",
            message="an object property needs either value or properties, not both",
            field_path=".properties",
            check=lambda s: s.type != "object" or ((s.value is None) != (s.properties is None)),
        ),
    )

    type: OutputType
    """The JSON Schema type of the value: string, integer, number, boolean, object or array."""
    description: str | None = Field(default=None, max_length=4096)
    """What the property means (in the tool's outputSchema)."""
    value: str | None = Field(default=None, max_length=4096)
    """A template giving the value ({{.steps.ID.output.field}}, {{.params.x}}); for object and array
    types it may render to JSON text, which is parsed."""
    properties: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """Nested properties of an object property (each with type, description, value / properties)."""
    default: Any = Field(default=None, json_schema_extra=FREE_FORM)
    """The value when the template renders to nothing (coerced to type)."""

    @field_validator("properties")
    @classmethod
    def _nested(cls, value: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        depth = (info.context or {}).get("output_depth", 0) if isinstance(info.context, dict) else 0
        if value is not None:
            if depth >= MAX_OUTPUT_DEPTH:
                raise ValueError(f"nested deeper than {MAX_OUTPUT_DEPTH} levels")
            if len(value) > MAX_OUTPUT_PROPERTIES:
                raise ValueError(f"more than {MAX_OUTPUT_PROPERTIES} properties")
            for name, nested in value.items():
                try:
                    OutputProperty.model_validate(nested, context={"output_depth": depth + 1})
                except ValidationError as exc:
                    raise ValueError(f"{name}: {_first_error(exc)}") from None
        return value


MAX_OUTPUT_PROPERTIES = 100


class CompositeOutput(RuleModel):
    """The structured output of a composite tool: its properties, each rendered from a template; the
    tool advertises the matching `outputSchema` and answers `structuredContent`."""

    rules = (
        Rule(
            cel="!has(self.required) || self.required.all(r, r in self.properties)",
            message="required names a property that properties does not define",
            field_path=".required",
            check=lambda s: all(r in s.properties for r in s.required or ()),
        ),
    )

    properties: dict[str, OutputProperty] = Field(max_length=MAX_OUTPUT_PROPERTIES)
    """The output's properties by name."""
    required: list[Annotated[str, Field(max_length=253)]] | None = Field(default=None, max_length=100)
    """Properties that must have a value: a run that renders none for one of them fails."""


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    return f"{loc}: {err['msg']}" if loc else str(err["msg"])


class CompositeAnnotations(ApiModel):
    """MCP tool annotations declared for a composite tool."""

    title: str | None = Field(default=None, max_length=256)
    """Human-readable title."""
    read_only_hint: bool | None = None
    """The tool does not modify its environment."""
    destructive_hint: bool | None = None
    """The tool may perform destructive updates."""
    idempotent_hint: bool | None = None
    """Repeated calls with the same arguments have no further effect."""
    open_world_hint: bool | None = None
    """The tool interacts with an open world of external entities."""


class CompositeTool(RuleModel):
    """A tool whose steps call backend tools."""

    rules = (
        Rule(
            cel="self.steps.all(s, !has(s.dependsOn) || s.dependsOn.all(d, self.steps.exists(t, t.id == d)))",
            message="dependsOn names a step that does not exist",
            field_path=".steps",
            check=lambda s: _unknown_dependency(s) is None,
            detail=lambda s: f"step {_unknown_dependency(s)}",
        ),
    )

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")
    """Name clients call."""
    description: str = ""
    """Description clients see."""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}, json_schema_extra=FREE_FORM
    )
    """JSON Schema of the tool's input."""
    steps: list[WorkflowStep] = Field(
        min_length=1,
        max_length=20,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"]},
    )
    """Steps, forming a DAG through dependsOn."""
    timeout: Duration | None = None
    """Time limit of the whole tool."""
    output: CompositeOutput | None = None
    """Structured output: each property rendered from its `value` template (else the last step's
    result is the tool's result)."""
    annotations: CompositeAnnotations | None = None
    """MCP tool annotations clients see."""
    failure_mode: Literal["abort", "continue", "best_effort"] | None = None
    """Accepted as ToolHive's examples write it; each step's `onError` decides what a failure does."""

    @model_validator(mode="after")
    def _acyclic(self) -> CompositeTool:
        ids = [s.id for s in self.steps]
        if len(ids) != len(set(ids)):
            raise ValueError(".steps: step ids must be unique")
        deps = {s.id: set(s.depends_on) for s in self.steps}
        done: set[str] = set()
        while len(done) < len(deps):
            ready = {k for k, v in deps.items() if k not in done and v <= done}
            if not ready:
                cycle = sorted(set(deps) - done)
                raise ValueError(f".steps: dependsOn forms a cycle among {', '.join(cycle)}")
            done |= ready
        return self


class CircuitBreaker(ApiModel):
    """Stop calling a failing backend for a while."""

    enabled: bool = False
    """Turn the circuit breaker on."""
    failure_threshold: int = Field(default=5, ge=1)
    """Consecutive failures that open the circuit."""
    timeout: Duration = "60s"
    """How long the circuit stays open before a trial call."""


class FailureHandling(ApiModel):
    """Backend health checking and failure policy."""

    health_check_interval: Duration = "30s"
    """Time between health checks of each backend."""
    health_check_timeout: Duration = "10s"
    """Time limit of one health check."""
    unhealthy_threshold: int = Field(default=3, ge=1)
    """Consecutive failed checks before a backend is unhealthy."""
    partial_failure_mode: Literal["fail", "best_effort"] = "fail"
    """fail: an unhealthy backend makes the gateway not ready; best_effort: serve the healthy ones."""
    status_reporting_interval: Duration = "30s"
    """How often the gateway reports its backends into the VirtualMCPServer status."""
    circuit_breaker: CircuitBreaker = Field(default_factory=CircuitBreaker)
    """Circuit breaker settings."""


class Timeouts(ApiModel):
    """Time limits of backend calls."""

    default: Duration = "30s"
    """Default time limit of one backend call."""
    per_workload: dict[str, Duration] = Field(default_factory=dict)
    """Per-backend overrides of the default."""

    def for_backend(self, name: str) -> float:
        """The time limit of a call to backend `name`, in seconds."""
        return parse_duration(self.per_workload.get(name, self.default))


class Operational(ApiModel):
    """Run-time behaviour of the gateway."""

    failure_handling: FailureHandling = Field(default_factory=FailureHandling)
    """Health checks and failure policy."""
    timeouts: Timeouts = Field(default_factory=Timeouts)
    """Backend call time limits."""
    log_level: Literal["debug", "info", "warning", "error"] | None = None
    """Log level of the gateway."""


_DECIMAL = r"^([0-9]*[.])?[0-9]+$"
_HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"


class Optimizer(RuleModel):
    """Tool discovery for large fleets (ToolHive's `optimizer` shape): the gateway advertises `find_tool`
    and `call_tool`, and ranks tools with a keyword (BM25) index, optionally blended with embeddings.

    Present means on. Without `embeddingService` ranking is keyword-only and needs nothing else.
    """

    rules = (
        Rule(
            cel="!has(self.embeddingHeaders) || (has(self.embeddingProvider) && self.embeddingProvider == 'openai')",
            message="embeddingHeaders is only supported when embeddingProvider is 'openai'",
            field_path=".embeddingHeaders",
            check=lambda s: not s.embedding_headers or s.embedding_provider == "openai",
        ),
        Rule(
            cel="!has(self.embeddingProvider) || self.embeddingProvider != 'openai' || "
            "!has(self.embeddingService) || has(self.embeddingModel)",
            message="embeddingModel is required when embeddingProvider is 'openai'",
            field_path=".embeddingModel",
            check=lambda s: (
                s.embedding_provider != "openai" or s.embedding_service is None or bool(s.embedding_model)
            ),
        ),
        Rule(
            cel='!has(self.embeddingHeaders) || self.embeddingHeaders.all(k, k.matches("'
            + _HEADER_NAME
            + "\") && !(k.lowerAscii() in ['authorization', 'content-type']))",
            message="embeddingHeaders names must be valid HTTP header names other than Authorization and Content-Type",
            field_path=".embeddingHeaders",
            check=lambda s: all(
                re.match(_HEADER_NAME, k) and k.lower() not in ("authorization", "content-type")
                for k in s.embedding_headers
            ),
        ),
    )

    embedding_service: str | None = Field(default=None, pattern=r"^https?://", max_length=2048)
    """Base URL of the embedding service (TEI, or OpenAI-compatible: `/embeddings` is appended); unset:
    keyword ranking only."""
    embedding_provider: Literal["tei", "openai"] = "tei"
    """Wire protocol of the embedding service: tei (`POST /embed`) or openai (`POST /embeddings`)."""
    embedding_model: str | None = Field(default=None, max_length=256)
    """Model requested from an openai-provider service (required for it). The key, if any, is read
    from the OPENAI_API_KEY environment variable, never from the spec."""
    embedding_headers: dict[str, Annotated[str, Field(min_length=1, max_length=8192)]] = Field(
        default_factory=dict, max_length=32
    )
    """Extra headers of every embedding request (openai provider); plain text, not for secrets."""
    embedding_service_timeout: Duration = "30s"
    """Time limit of one request to the embedding service."""
    max_tools_to_return: int = Field(default=8, ge=1, le=50)
    """Most tools one find_tool answer holds."""
    hybrid_search_semantic_ratio: str = Field(default="0.5", pattern=_DECIMAL)
    """Weight of the embedding score against the keyword score (0: keyword only, 1: embeddings only)."""
    semantic_distance_threshold: str = Field(default="1.0", pattern=_DECIMAL)
    """Largest cosine distance (0 identical, 2 opposite) an embedding-only match may have."""
    expose_all_tools: bool = False
    """Advertise every tool beside find_tool and call_tool (default: only the meta-tools, so a client
    never receives the full list)."""


class CodeMode(ApiModel):
    """Code mode (ToolHive's `codeMode` shape): `execute_tool_script` runs a Starlark script that calls
    the gateway's tools as functions, each call routed and authorized as a normal tools/call."""

    enabled: bool = False
    """Advertise execute_tool_script."""
    step_limit: int = Field(default=100_000, ge=1, le=100_000_000)
    """Most Starlark execution steps of one script (counted in blocks of about 1,000)."""
    parallel_max_concurrency: int = Field(default=10, ge=1, le=100)
    """Most tool calls one parallel() runs at once."""
    tool_call_timeout: Duration = "30s"
    """Time limit of each tool call a script makes."""
    script_timeout: Duration = "60s"
    """Time limit of the whole script, tool calls included."""
    max_tool_calls: int = Field(default=100, ge=1, le=10_000)
    """Most tool calls one script makes."""
    max_script_bytes: int = Field(default=65_536, ge=1, le=1_048_576)
    """Largest script accepted."""
    max_output_bytes: int = Field(default=1_048_576, ge=1, le=16_777_216)
    """Largest result (JSON) a script may return."""
    memory_limit_mb: int = Field(default=512, ge=64, le=8192)
    """Address-space limit of the process a script runs in."""
    max_concurrent_scripts: int = Field(default=8, ge=1, le=256)
    """Most scripts running at once in one gateway (one process each, plus one warm spare); as many
    more wait for a free slot (up to scriptTimeout), and a script beyond those is refused."""


RESTRICTED_PASSTHROUGH = frozenset(
    {
        # Routing, hop-by-hop (RFC 9110 7.6.1, RFC 7540) and proxy headers, request smuggling vectors,
        # forwarding identity (ToolHive's RestrictedHeaders) ...
        "host",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "http2-settings",
        "proxy-authorization",
        "proxy-authenticate",
        "proxy-connection",
        "transfer-encoding",
        "content-length",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
        # ... and the caller's credentials, which ToolHive's gateway refuses to pass through too.
        "authorization",
        "cookie",
        # What the gateway sets itself toward a backend: the protocol headers and the session.
        "content-type",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "last-event-id",
    }
)
"""Header names `passthroughHeaders` may not name (compared case-insensitively)."""

_RESTRICTED_CEL = "[" + ", ".join(f"'{h}'" for h in sorted(RESTRICTED_PASSTHROUGH)) + "]"

PassthroughHeaderName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"!(self.lowerAscii() in {_RESTRICTED_CEL})",
                    "message": "a restricted header (Host, hop-by-hop, X-Forwarded-*, Authorization, Cookie,"
                    " the MCP protocol headers) cannot be passed through",
                }
            ]
        },
    ),
]


def _passthrough(names: list[str] | None) -> list[str] | None:
    """`passthroughHeaders` checked: no restricted name, no name twice (case-insensitive)."""
    if names is None:
        return None
    seen: set[str] = set()
    for i, name in enumerate(names):
        lowered = name.lower()
        if lowered in RESTRICTED_PASSTHROUGH:
            raise ValueError(f"[{i}]: {name} is a restricted header and cannot be passed through")
        if lowered in seen:
            raise ValueError(f"[{i}]: {name} is listed twice")
        seen.add(lowered)
    return names


PassthroughHeaders = Annotated[
    list[PassthroughHeaderName] | None,
    Field(default=None, max_length=32, json_schema_extra={"x-kubernetes-list-type": "atomic"}),
    AfterValidator(_passthrough),
]


class GatewayConfig(ApiModel):
    """What the manifest's gateway configuration and the gateway's config file share."""

    aggregation: Aggregation = Field(default_factory=Aggregation)
    """How capabilities are merged."""
    composite_tools: list[CompositeTool] = Field(
        default_factory=list,
        max_length=50,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Tools made of steps that call backend tools."""
    operational: Operational = Field(default_factory=Operational)
    """Health checks, failure policy, timeouts."""
    rate_limiting: RateLimiting | None = None
    """Token buckets per gateway and per user, overall and per tool; requests over the limit get a
    JSON-RPC error with a retry-after (HTTP 429 + Retry-After)."""
    optimizer: Optimizer | None = None
    """Tool discovery: advertise find_tool / call_tool over a ranked index instead of (or beside) every tool."""
    code_mode: CodeMode = Field(default_factory=CodeMode)
    """Server-side Starlark scripts over the gateway's tools (execute_tool_script)."""
    audit: AuditConfig | None = None
    """Audit logging: one JSON line per MCP request (ToolHive's `config.audit`)."""
    passthrough_headers: PassthroughHeaders
    """Client request headers (an allowlist of names) forwarded verbatim to every backend, e.g. an API
    key a backend resolves to a user. Not Host, hop-by-hop, X-Forwarded-*, Authorization, Cookie or
    the MCP protocol headers. A client can set them: trust them only when a proxy in front does."""


LIVE_CONFIG_FIELDS = ("aggregation", "compositeTools", "toolConfigs", "optimizer", "codeMode", "authz")
"""Top-level keys of the gateway's config file it re-applies in place when the file changes (tool
filters, overrides, composite tools, the inlined MCPToolConfigs, the authz policies): an edit of these keeps the process
and its client sessions. Everything else (port, incoming / outgoing auth, operational settings)
restarts it; the group members are followed live from their own source."""


def _unknown_dependency(tool: CompositeTool) -> str | None:
    """`'<step>' dependsOn: unknown step '<name>'` for the first dependency naming no step, else None."""
    ids = {s.id for s in tool.steps}
    for step in tool.steps:
        for dependency in step.depends_on:
            if dependency not in ids:
                return f"{step.id!r} dependsOn: unknown step {dependency!r}"
    return None
