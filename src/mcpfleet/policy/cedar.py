"""Cedar authorization of MCP requests, with the `cedarpy` engine, in ToolHive's entity model.

A request is `principal, action, resource, context`:

* principal `Client::"<sub>"` (`anonymous` without a token) whose attributes are the token's claims
  as `claim_<name>`; its parents are `<groupEntityType>::"<group>"` (default `THVGroup`) for each
  group / role in the token (`groupClaimName`, else `groups`, `roles`, `cognito:groups`; plus
  `roleClaimName`);
* action `Action::"call_tool"`, `"get_prompt"` or `"read_resource"` (list results are filtered by
  asking the same question per item, as ToolHive does);
* resource `Tool::"<name>"`, `Prompt::"<name>"` or `Resource::"<uri>"` with attributes `name`,
  `operation`, `feature` and, on the gateway, `backend`; its
  parent is `Backend::"<backend>"` on the gateway (so `resource in Backend::"github"` works). The
  static entity store (`entities_json`) adds attributes and parents (e.g. `owner`);
* context: the claims (`claim_*`) and the tool / prompt arguments (`arg_<name>`).

Speed: parsing is done once per policy set; a caller's principal + resource entities are built once
and cached (arguments live in the context, so they do not defeat the cache). Policies are grouped by their scope (action and
resource constraints read from Cedar's JSON form), and a request is evaluated only against the
policies whose scope can match it — a policy whose scope does not match is not applicable in Cedar
anyway, so the decision is the same — keeping 100 policies near the cost of a few.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cedarpy
import orjson

from mcpfleet.policy.config import AuthzConfigError, AuthzDocument

log = logging.getLogger(__name__)

PRINCIPAL_TYPE = "Client"
BACKEND_TYPE = "Backend"
DEFAULT_GROUP_ENTITY_TYPE = "THVGroup"
DEFAULT_GROUP_CLAIMS = ("groups", "roles", "cognito:groups")
GENERATED_TYPES = frozenset({PRINCIPAL_TYPE, "Tool", "Prompt", "Resource"})
"""Entity types built per request: their static entities are merged into the request's, not kept in
the shared store (Cedar refuses two entities with one uid)."""

# MCP feature -> (Cedar action, resource entity type)
FEATURES: dict[str, tuple[str, str]] = {
    "tool": ("call_tool", "Tool"),
    "prompt": ("get_prompt", "Prompt"),
    "resource": ("read_resource", "Resource"),
}
SCOPE_CACHE_SIZE = 4096
ENTITY_CACHE_SIZE = 1024
MAX_VALUE_DEPTH = 16
_ESCAPES = frozenset({"__entity", "__extn", "__expr"})
_I64 = 2**63


def cedar_value(value: Any, depth: int = 0) -> Any:
    """A JSON value as a Cedar attribute value, or None when Cedar has no form for it (null).

    Hostile input: a client-sent record with `__entity` / `__extn` keys would otherwise be read as
    an entity reference or an extension call; it becomes its JSON text. Floats (no Cedar type) and
    integers outside i64 become strings.
    """
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -_I64 <= value < _I64 else str(value)
    if isinstance(value, float):
        return str(value) if math.isfinite(value) else None
    if depth >= MAX_VALUE_DEPTH:
        return orjson.dumps(value, default=str).decode()
    if isinstance(value, list):
        return [v for v in (cedar_value(item, depth + 1) for item in value) if v is not None]
    if isinstance(value, dict):
        if _ESCAPES.intersection(value):
            return orjson.dumps(value, default=str).decode()
        out = {}
        for key, item in value.items():
            converted = cedar_value(item, depth + 1)
            if converted is not None:
                out[str(key)] = converted
        return out
    return None


def _prefixed(prefix: str, values: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        converted = cedar_value(value)
        if converted is not None:
            out[f"{prefix}{key}"] = converted
    return out


@dataclass(frozen=True)
class _Scope:
    """What a policy string's heads constrain: None = anything."""

    actions: frozenset[str] | None
    resources: frozenset[tuple[str, str]] | None
    resource_types: frozenset[str] | None


def _action_ids(head: dict[str, Any]) -> frozenset[str] | None:
    op = head.get("op")
    if op == "==":
        return frozenset({str(head["entity"]["id"])})
    if op == "in" and "entities" in head:
        return frozenset(str(e["id"]) for e in head["entities"])
    return None  # All, or `in` an action group (needs the hierarchy): could match anything


def _resource_heads(head: dict[str, Any]) -> tuple[frozenset[tuple[str, str]] | None, frozenset[str] | None]:
    op = head.get("op")
    if op == "==" and "entity" in head:
        entity = head["entity"]
        return frozenset({(str(entity["type"]), str(entity["id"]))}), None
    if op == "is":
        return None, frozenset({str(head["entity_type"])})
    return None, None  # All, `in` (needs the hierarchy), slots


def _scope_of(policy: str, index: int) -> _Scope:
    """The union of the scopes of the policies in one policy string."""
    try:
        est = orjson.loads(cedarpy.policies_to_json_str(policy))
    except (ValueError, orjson.JSONDecodeError) as exc:
        raise AuthzConfigError(f"cedar.policies[{index}]: {exc}") from exc
    bodies = list((est.get("staticPolicies") or {}).values())
    if est.get("templates") or not bodies:
        raise AuthzConfigError(f"cedar.policies[{index}]: expected at least one static policy (no templates)")
    actions: set[str] | None = set()
    resources: set[tuple[str, str]] | None = set()
    types: set[str] | None = set()
    for body in bodies:
        ids = _action_ids(body.get("action") or {})
        actions = None if ids is None or actions is None else actions | ids
        exact, typed = _resource_heads(body.get("resource") or {})
        if exact is None and typed is None:
            resources = types = None
        elif resources is not None and types is not None:
            resources |= exact or set()
            types |= typed or set()
    return _Scope(
        actions=frozenset(actions) if actions is not None else None,
        resources=frozenset(resources) if resources is not None else None,
        resource_types=frozenset(types) if types is not None else None,
    )


def _matches(scope: _Scope, action: str, rtype: str, rid: str) -> bool:
    if scope.actions is not None and action not in scope.actions:
        return False
    if scope.resources is None or scope.resource_types is None:
        return True
    return (rtype, rid) in scope.resources or rtype in scope.resource_types


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str
    """Why, for logs and the audit: the determining policy ids, or the evaluation errors."""


class Authorizer:
    """One compiled policy set; immutable (a reload builds a new one)."""

    def __init__(self, document: AuthzDocument) -> None:
        cedar = document.cedar
        if cedar is None:
            raise AuthzConfigError("cedar: required")
        self.policies = list(cedar.policies)
        self._scopes = [_scope_of(policy, i) for i, policy in enumerate(self.policies)]
        try:
            cedarpy.PolicySet.from_str("\n".join(self.policies))
        except ValueError as exc:
            raise AuthzConfigError(f"cedar.policies: {exc}") from exc
        try:
            entities = orjson.loads(cedar.entities_json or "[]")
        except orjson.JSONDecodeError as exc:
            raise AuthzConfigError(f"cedar.entities_json: not JSON: {exc}") from exc
        if not isinstance(entities, list):
            raise AuthzConfigError("cedar.entities_json: expected a JSON array of entities")
        self._static: dict[tuple[str, str], dict[str, Any]] = {}
        kept: list[Any] = []
        for index, entity in enumerate(entities):
            uid = _uid(entity, index)
            if uid[0] in GENERATED_TYPES:
                self._static[uid] = entity
            else:
                kept.append(entity)
        try:
            self._base = cedarpy.Entities.from_json_str(orjson.dumps(kept).decode())
        except ValueError as exc:
            raise AuthzConfigError(f"cedar.entities_json: {exc}") from exc
        group_claim = document.group_claim_name or cedar.group_claim_name
        role_claim = document.role_claim_name or cedar.role_claim_name
        self._group_claims = tuple(c for c in ((group_claim,) if group_claim else DEFAULT_GROUP_CLAIMS)) + (
            (role_claim,) if role_claim else ()
        )
        self._group_type = document.group_entity_type or cedar.group_entity_type or DEFAULT_GROUP_ENTITY_TYPE
        self._sets: OrderedDict[tuple[str, str, str], cedarpy.PolicySet | None] = OrderedDict()
        self._entity_cache: OrderedDict[bytes, cedarpy.Entities] = OrderedDict()

    def _policy_set(self, action: str, rtype: str, rid: str) -> cedarpy.PolicySet | None:
        key = (action, rtype, rid)
        cached = self._sets.get(key, False)
        if cached is not False:
            self._sets.move_to_end(key)
            return cached  # type: ignore[return-value]
        text = [
            p for p, s in zip(self.policies, self._scopes, strict=True) if _matches(s, action, rtype, rid)
        ]
        built = cedarpy.PolicySet.from_str("\n".join(text)) if text else None
        self._sets[key] = built
        if len(self._sets) > SCOPE_CACHE_SIZE:
            self._sets.popitem(last=False)
        return built

    def _entities(self, principal: dict[str, Any], resource: dict[str, Any]) -> cedarpy.Entities:
        """The static store plus this request's principal and resource, cached: a caller's calls to one
        tool build the same entities (the arguments are in the context, not in them)."""
        key = orjson.dumps([principal, resource])
        entities = self._entity_cache.get(key)
        if entities is not None:
            self._entity_cache.move_to_end(key)
            return entities
        entities = self._base.with_added_json_str(key.decode())
        self._entity_cache[key] = entities
        if len(self._entity_cache) > ENTITY_CACHE_SIZE:
            self._entity_cache.popitem(last=False)
        return entities

    def _principal(self, claims: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
        claims = claims or {}
        sub = claims.get("sub")
        pid = sub if isinstance(sub, str) and sub else "anonymous"
        attrs = _prefixed("claim_", claims)
        parents: list[dict[str, str]] = []
        for claim in self._group_claims:
            groups = claims.get(claim)
            if isinstance(groups, str):
                groups = [groups]
            if isinstance(groups, list):
                parents.extend({"type": self._group_type, "id": g} for g in groups if isinstance(g, str))
        entity: dict[str, Any] = {
            "uid": {"type": PRINCIPAL_TYPE, "id": pid},
            "attrs": attrs,
            "parents": parents,
        }
        static = self._static.get((PRINCIPAL_TYPE, pid))
        if static is not None:
            entity["attrs"] = {**(static.get("attrs") or {}), **attrs}
            entity["parents"] = [*(static.get("parents") or []), *parents]
        return entity, attrs

    def authorize(
        self,
        claims: Mapping[str, Any] | None,
        feature: str,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        backend: str | None = None,
    ) -> Decision:
        """May the caller with `claims` use the tool / prompt / resource `name` (feature tool, prompt,
        resource) with `arguments`, on `backend` (gateway)?"""
        action, rtype = FEATURES[feature]
        policies = self._policy_set(action, rtype, name)
        if policies is None:
            return Decision(False, "no policy applies")
        principal, claim_attrs = self._principal(claims)
        args = _prefixed("arg_", arguments)
        attrs: dict[str, Any] = {"name": name, "operation": action, "feature": feature}
        parents: list[Any] = []
        if backend is not None:
            attrs["backend"] = backend
            parents.append({"type": BACKEND_TYPE, "id": backend})
        static = self._static.get((rtype, name))
        if static is not None:
            attrs = {**attrs, **(static.get("attrs") or {})}
            parents = [*parents, *(static.get("parents") or [])]
        resource = {"uid": {"type": rtype, "id": name}, "attrs": attrs, "parents": parents}
        request = {
            "principal": principal["uid"],
            "action": {"type": "Action", "id": action},
            "resource": resource["uid"],
            "context": {**claim_attrs, **args},
        }
        try:
            result = cedarpy.is_authorized(request, policies, self._entities(principal, resource))
        except ValueError as exc:
            # E.g. a static entity naming the same uid as a group parent: refuse, never fail open.
            return Decision(False, f"evaluation failed: {exc}")
        diagnostics = result.diagnostics
        if result.allowed:
            return Decision(True, "permitted")
        if diagnostics.reasons:
            return Decision(False, "a forbid policy applies")
        if diagnostics.errors:
            # A policy that errors does not apply (Cedar): reported, since it is usually a typo.
            return Decision(False, "no policy permits it; errors: " + "; ".join(map(str, diagnostics.errors)))
        return Decision(False, "no policy permits it")

    def filter_items(
        self,
        claims: Mapping[str, Any] | None,
        feature: str,
        items: list[Any],
        backend_of: Mapping[str, str] | None = None,
    ) -> list[Any]:
        """The list items (tools / prompts: `name`; resources: `uri`) the caller may use."""
        key = "uri" if feature == "resource" else "name"
        out = []
        for item in items:
            name = item.get(key) if isinstance(item, dict) else None
            if not isinstance(name, str):
                continue
            backend = backend_of.get(name) if backend_of is not None else None
            if self.authorize(claims, feature, name, None, backend).allowed:
                out.append(item)
        return out


def _uid(entity: Any, index: int) -> tuple[str, str]:
    uid = entity.get("uid") if isinstance(entity, dict) else None
    if isinstance(uid, str):
        # ToolHive's examples write `"uid": "Tool::weather"`: Cedar wants {type, id}.
        etype, sep, eid = uid.rpartition("::")
        if not sep or not etype:
            raise AuthzConfigError(f"cedar.entities_json[{index}].uid: expected Type::id, got {uid!r}")
        entity["uid"] = {"type": etype, "id": eid.strip('"')}
        return etype, eid.strip('"')
    if isinstance(uid, dict) and isinstance(uid.get("type"), str) and isinstance(uid.get("id"), str):
        if "__entity" in uid:
            uid = uid["__entity"]
        return uid["type"], uid["id"]
    raise AuthzConfigError(f"cedar.entities_json[{index}].uid: expected {{type, id}} or 'Type::id'")
