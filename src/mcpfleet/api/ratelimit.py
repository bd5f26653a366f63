"""Rate limiting and session storage: ToolHive's v1beta1 `rateLimiting` and `sessionStorage` shapes.

Shared by MCPServer (`spec.rateLimiting`, `spec.sessionStorage`) and VirtualMCPServer
(`spec.config.rateLimiting`, `spec.sessionStorage`). The data plane reads the same models from its
config file (`mcpfleet.ratelimit`, `mcpfleet.vmcp.sessions`).

One deliberate difference from ToolHive: ToolHive's CRD requires `sessionStorage.provider: redis`
whenever `rateLimiting` is set. mcpfleet keeps the buckets in memory for a single replica (nothing
to share, and no Redis to run), so Redis is required only when the workload has more than one
replica - the case where in-memory buckets would multiply the limit by the replica count.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcpfleet.api.duration import Duration
from mcpfleet.api.meta import ApiModel, Rule, RuleModel, SecretKeyRef

MAX_TOOL_LIMITS = 200


class TokenBucket(ApiModel):
    """A token bucket: `maxTokens` requests at once, refilled evenly over `refillPeriod`."""

    max_tokens: int = Field(ge=1, le=2_147_483_647)
    """Bucket capacity, which is also the burst: requests served at once before the bucket is empty."""
    refill_period: Duration
    """Time to refill the bucket from empty to maxTokens (rate = maxTokens / refillPeriod)."""


class ToolRateLimit(RuleModel):
    """Extra limits on calls of one tool (a call must pass both the server and the tool limits)."""

    rules = (
        Rule(
            cel="has(self.shared) || has(self.perUser)",
            message="at least one of shared or perUser must be configured",
            field_path="",
            check=lambda s: s.shared is not None or s.per_user is not None,
        ),
    )

    name: str = Field(min_length=1, max_length=256)
    """Tool name as clients call it."""
    shared: TokenBucket | None = None
    """One bucket for all callers of this tool."""
    per_user: TokenBucket | None = None
    """One bucket per authenticated user for this tool."""


class RateLimiting(RuleModel):
    """Token buckets per server and per user, overall and per tool."""

    rules = (
        Rule(
            cel="has(self.shared) || has(self.perUser) || (has(self.tools) && size(self.tools) > 0)",
            message="at least one of shared, perUser, or tools must be configured",
            field_path="",
            check=lambda s: s.shared is not None or s.per_user is not None or bool(s.tools),
        ),
    )

    shared: TokenBucket | None = None
    """One bucket for every request to the server, all users together."""
    per_user: TokenBucket | None = None
    """One bucket per authenticated user (needs incoming authentication)."""
    tools: list[ToolRateLimit] = Field(
        default_factory=list,
        max_length=MAX_TOOL_LIMITS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Per-tool limits, added to the server-level ones."""

    @property
    def needs_user(self) -> bool:
        """True when some bucket is per user (which needs an authenticated caller)."""
        return self.per_user is not None or any(t.per_user is not None for t in self.tools)


class SessionStorage(RuleModel):
    """Where sessions (and shared rate-limit buckets) live when several replicas serve one endpoint."""

    rules = (
        Rule(
            cel="self.provider == 'redis' ? has(self.address) : true",
            message="address is required",
            field_path=".address",
            check=lambda s: s.provider != "redis" or s.address is not None,
        ),
    )

    provider: Literal["memory", "redis"]
    """memory (one replica) or redis (shared by every replica)."""
    address: str | None = Field(default=None, min_length=1, max_length=512)
    """Redis address, host:port."""
    db: int = Field(default=0, ge=0, le=2_147_483_647)
    """Redis database number."""
    key_prefix: str | None = Field(default=None, max_length=128)
    """Prefix of every Redis key mcpfleet writes."""
    password_ref: SecretKeyRef | None = None
    """Secret key holding the Redis password (given to the process as an environment variable, never
    written into a config file)."""


def needs_redis_rule(rate_limiting: str, session_storage: str, replicas: str) -> str:
    """CEL: rate limiting over more than one replica needs Redis session storage (see module doc)."""
    return (
        f"!has({rate_limiting}) || !has({replicas}) || {replicas} <= 1 || "
        f"(has({session_storage}) && {session_storage}.provider == 'redis')"
    )


NEEDS_REDIS_MESSAGE = "rateLimiting with more than one replica requires sessionStorage with provider 'redis'"


def needs_redis(
    rate_limiting: RateLimiting | None, storage: SessionStorage | None, replicas: int | None
) -> bool:
    """The Python side of `needs_redis_rule`: True when the combination is valid."""
    return (
        rate_limiting is None
        or replicas is None
        or replicas <= 1
        or (storage is not None and storage.provider == "redis")
    )


REDIS_PASSWORD_ENV = "MCPFLEET_REDIS_PASSWORD"
"""The environment variable carrying the Redis password into a proxy or gateway process."""
