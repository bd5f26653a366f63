"""Which MCP requests authorization looks at, and what a refusal looks like (proxy and gateway alike).

Guarded requests name one tool, prompt or resource: `tools/call`, `prompts/get`, `resources/read`,
`resources/subscribe` and `completion/complete` (of a prompt or a resource). List requests
(`tools/list`, `prompts/list`, `resources/list`) are answered with only the items the caller may
use. Everything else (initialize, ping, notifications, logging/setLevel) passes: it names nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from mcpfleet.api.policy import AuditConfig
    from mcpfleet.policy.audit import AuditLog
    from mcpfleet.policy.cedar import Decision
    from mcpfleet.policy.engine import PolicyEngine

FORBIDDEN = -32012
"""JSON-RPC error code of a request the policies do not permit (next to -32011 unauthenticated)."""

# list method -> (feature, result key)
LISTS: dict[str, tuple[str, str]] = {
    "tools/list": ("tool", "tools"),
    "prompts/list": ("prompt", "prompts"),
    "resources/list": ("resource", "resources"),
}


@dataclass(frozen=True)
class Target:
    """The one thing a guarded request acts on."""

    feature: str
    name: str
    arguments: Mapping[str, Any] | None = None


def target_of(method: str, params: Any) -> Target | None:
    """The tool / prompt / resource a request names, or None when it names none."""
    if not isinstance(params, dict):
        return None
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments")
        return (
            Target("tool", name, args if isinstance(args, dict) else None) if isinstance(name, str) else None
        )
    if method == "prompts/get":
        name, args = params.get("name"), params.get("arguments")
        return (
            Target("prompt", name, args if isinstance(args, dict) else None)
            if isinstance(name, str)
            else None
        )
    if method in ("resources/read", "resources/subscribe"):
        uri = params.get("uri")
        return Target("resource", uri) if isinstance(uri, str) else None
    if method == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, dict):
            if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                return Target("prompt", ref["name"])
            if ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
                return Target("resource", ref["uri"])
    return None


def denial(method: str, target: Target) -> str:
    return (
        f"forbidden by policy: {method} of {target.feature} {target.name!r} is not permitted for this caller"
    )


def forbidden_error(request_id: Any, method: str, target: Target) -> dict[str, Any]:
    """The JSON-RPC error answering a refused request."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": FORBIDDEN,
            "message": denial(method, target),
            "data": {"reason": "policy", target.feature: target.name},
        },
    }


@dataclass
class Policy:
    """What a service enforces and records: authorization (None: everything permitted) and audit."""

    engine: PolicyEngine | None = None
    audit: AuditLog | None = None

    @property
    def active(self) -> bool:
        return self.engine is not None or self.audit is not None

    def check(
        self, claims: Mapping[str, Any] | None, target: Target, backend: str | None = None
    ) -> Decision | None:
        """The decision on `target` (None without authorization: permitted)."""
        if self.engine is None:
            return None
        return self.engine.authorizer().authorize(
            claims, target.feature, target.name, target.arguments, backend
        )

    def filter_result(
        self,
        claims: Mapping[str, Any] | None,
        method: str,
        result: Any,
        backend_of: Mapping[str, str] | None = None,
    ) -> Any:
        """A list result with only the items the caller may use (unchanged without authorization)."""
        if self.engine is None or method not in LISTS or not isinstance(result, dict):
            return result
        feature, key = LISTS[method]
        items = result.get(key)
        if not isinstance(items, list):
            return result
        kept = self.engine.authorizer().filter_items(claims, feature, items, backend_of)
        return {**result, key: kept}


def load_audit(path: str, component: str) -> AuditLog | None:
    """The audit log of an `--audit-config` file (an `AuditConfig` as JSON); None when not enabled.
    Raises ValueError naming the file and the field."""
    from pathlib import Path

    from pydantic import ValidationError

    from mcpfleet.api.policy import AuditConfig

    try:
        config = AuditConfig.model_validate_json(Path(path).read_bytes()[:1_048_576])
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the audit config: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"{path}: {problems}") from exc
    if not config.enabled:
        return None
    try:
        return audit_log(config, component, Path(path).parent)
    except OSError as exc:
        raise ValueError(f"{path}: logFile: cannot open {config.log_file}: {exc.strerror or exc}") from exc


def audit_log(config: AuditConfig, component: str, base_dir: Path | None) -> AuditLog:
    """The AuditLog of `config`; a relative `logFile` is taken relative to `base_dir` (the workload's
    config folder), not to the working directory: `mcpfleet up` hosts services in its own process."""
    from pathlib import Path

    from mcpfleet.policy.audit import AuditLog

    if config.log_file and base_dir is not None and not Path(config.log_file).is_absolute():
        config = config.model_copy(update={"log_file": str(base_dir / config.log_file)})
    return AuditLog(config, component)
