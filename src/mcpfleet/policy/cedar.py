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

Speed (docs/policy.md "How fast"), each step leaving the decision exactly Cedar's:

* parsing is done once per policy set (pre-parsed `cedarpy.PolicySet` / `Entities` handles); a
  resource's entities (the static store plus the resource) are built once, and a caller's first
  call adds only its principal to that handle; the caller's entities per resource are then cached
  (arguments live in the context, so they do not defeat the cache);
* policies are grouped by their scope (action and resource constraints read from Cedar's JSON
  form), and a request is evaluated only against the policies whose scope can match it — a policy
  whose scope does not match is not applicable in Cedar anyway;
* only the attributes the policies can observe are sent: Cedar reads an entity's attributes only
  through `e.attr` / `e has attr` with a literal name, so claims no policy reads on an entity are
  left out of the principal, and the context keeps only the names policies read on `context`
  itself — unless a policy uses `context` as a whole (e.g. `context == {...}`), where it is sent
  whole; an empty context is not sent (absent means empty). Cedar parses each attribute value per
  call, so this is most of the per-call cost with a token's dozen claims. The principal's group
  parents are sent only when some policy uses `in` (the only way Cedar observes the hierarchy);
* the decision is asked of cedarpy's extension function directly (`cedar_call`), skipping the
  wrapper's result objects, once checked to answer as the public API;
* decisions are cached (bounded LRU) keyed on exactly what Cedar is given — principal and resource
  entities, action, context — so equal keys are equal questions; the cache belongs to one
  `Authorizer`, i.e. one policy set, and a policy change builds a new one.

`tests/policy/test_cedar_equivalence.py` checks all of it against plain `cedarpy.is_authorized`
on the whole policy text and untrimmed entities, on generated policies and requests.
"""

from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cedarpy
import orjson

from mcpfleet.policy.cedar_call import decide
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
RESOURCE_CACHE_SIZE = 1024
DECISION_CACHE_SIZE = 4096
DECISION_KEY_MAX = 4096
"""Bytes: a request whose Cedar inputs are larger (big arguments the policies read) is decided
without the cache, so the cache holds at most ~16 MiB of keys."""
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
        return _json_text(value)
    if isinstance(value, list):
        return [v for v in (cedar_value(item, depth + 1) for item in value) if v is not None]
    if isinstance(value, dict):
        if _ESCAPES.intersection(value):
            return _json_text(value)
        out = {}
        for key, item in value.items():
            converted = cedar_value(item, depth + 1)
            if converted is not None:
                out[str(key)] = converted
        return out
    return None


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # an integer beyond 64 bits, which orjson refuses; the stdlib writes it
        return json.dumps(value, default=str, ensure_ascii=False)


def _prefixed(
    prefix: str, values: Mapping[str, Any] | None, keep: frozenset[str] | None = None
) -> dict[str, Any]:
    """`values` as Cedar attributes named `<prefix><key>`; only the names in `keep` (None: all)."""
    out: dict[str, Any] = {}
    if not values:
        return out
    if keep is None:
        pairs: Any = ((f"{prefix}{key}", value) for key, value in values.items())
    else:
        # Only the names a policy reads are looked up (a token carries a dozen claims, the
        # arguments may be large): converted only when a policy can read them.
        cut = len(prefix)
        pairs = (
            (name, values[name[cut:]]) for name in keep if name.startswith(prefix) and name[cut:] in values
        )
    for name, value in pairs:
        converted = cedar_value(value)
        if converted is not None:
            out[name] = converted
    return out


@dataclass(frozen=True)
class _Usage:
    """What a policy set can observe of the request's attributes (from Cedar's JSON form)."""

    attrs: frozenset[str]
    """Every attribute name read (`x.attr`, `x has attr`) anywhere: no other can affect a decision."""
    context_attrs: frozenset[str]
    """The names read directly on the context (`context.attr`, `context has attr`): the only
    context attributes a policy can observe unless it uses `context` as a whole."""
    entity_attrs: frozenset[str]
    """The names read on anything but the context variable itself: the only entity attributes a
    policy can observe (an entity is reached through `principal`, `resource` or an attribute)."""
    whole_context: bool
    """A policy uses `context` other than as `context.attr` / `context has attr` (e.g. compares it
    to a record): the context must then be sent whole."""
    hierarchy: bool
    """A policy uses `in` (in its scope or a condition): the only way Cedar observes an entity's
    parents. Without it the principal's group parents are left out."""


_CONTEXT_VAR = {"Var": "context"}


def _usage_of(est: Any) -> _Usage:
    on_context: set[str] = set()
    elsewhere: set[str] = set()
    whole = hierarchy = False
    stack: list[tuple[Any, bool]] = [(est, False)]
    while stack:
        node, under_access = stack.pop()
        if isinstance(node, list):
            stack.extend((item, False) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        if node.get("Var") == "context" and not under_access:
            whole = True
        if "in" in node or node.get("op") == "in":  # `x in y`; scope `in` / `is ... in`
            hierarchy = True
        for op, value in node.items():
            if op in (".", "has") and isinstance(value, dict) and isinstance(value.get("attr"), str):
                left = value.get("left")
                (on_context if left == _CONTEXT_VAR else elsewhere).add(value["attr"])
                stack.append((left, True))
                stack.extend((v, False) for k, v in value.items() if k not in ("left", "attr"))
            else:
                stack.append((value, False))
    return _Usage(
        frozenset(on_context | elsewhere), frozenset(on_context), frozenset(elsewhere), whole, hierarchy
    )


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


def _scope_of(policy: str, index: int) -> tuple[_Scope, Any]:
    """The union of the scopes of the policies in one policy string, and their JSON form."""
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
    scope = _Scope(
        actions=frozenset(actions) if actions is not None else None,
        resources=frozenset(resources) if resources is not None else None,
        resource_types=frozenset(types) if types is not None else None,
    )
    return scope, bodies


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

    def __init__(self, document: AuthzDocument, *, trim: bool = True, cache: bool = True) -> None:
        """`trim` / `cache` off: the slower paths, kept for the benchmark's side-by-side rows."""
        self._trim = trim
        self._cache = cache
        cedar = document.cedar
        if cedar is None:
            raise AuthzConfigError("cedar: required")
        self.policies = list(cedar.policies)
        parsed = [_scope_of(policy, i) for i, policy in enumerate(self.policies)]
        self._scopes = [scope for scope, _ in parsed]
        self._usage = _usage_of([bodies for _, bodies in parsed])
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
        self._resource_entities: OrderedDict[bytes, cedarpy.Entities] = OrderedDict()
        self._decisions: OrderedDict[bytes, Decision] = OrderedDict()
        self.cache_hits = 0

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

    def _entities(self, principal_key: bytes, resource_key: bytes) -> cedarpy.Entities:
        """The static store plus this request's principal and resource (their JSON lists), cached: a
        caller's calls to one tool build the same entities (the arguments are in the context).

        A caller's first call adds only its principal to a cached handle of the store plus the
        resource: cedarpy parses one entity instead of two (about half of that call's parsing)."""
        key = b"%s\x00%s" % (principal_key, resource_key)
        entities = self._entity_cache.get(key)
        if entities is not None:
            self._entity_cache.move_to_end(key)
            return entities
        with_resource = self._resource_entities.get(resource_key)
        if with_resource is None:
            with_resource = self._base.with_added_json_str(resource_key.decode())
            self._resource_entities[resource_key] = with_resource
            if len(self._resource_entities) > RESOURCE_CACHE_SIZE:
                self._resource_entities.popitem(last=False)
        else:
            self._resource_entities.move_to_end(resource_key)
        entities = with_resource.with_added_json_str(principal_key.decode())
        self._entity_cache[key] = entities
        if len(self._entity_cache) > ENTITY_CACHE_SIZE:
            self._entity_cache.popitem(last=False)
        return entities

    def _principal(
        self, claims: Mapping[str, Any] | None, keep: frozenset[str] | None, hierarchy: bool
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The principal entity and its claim attributes (only those named in `keep`; None: all);
        its group parents only when `hierarchy` (a policy uses `in`)."""
        claims = claims or {}
        sub = claims.get("sub")
        pid = sub if isinstance(sub, str) and sub else "anonymous"
        attrs = _prefixed("claim_", claims, keep)
        parents: list[dict[str, str]] = []
        for claim in self._group_claims if hierarchy else ():
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
            if hierarchy:
                entity["parents"] = [*(static.get("parents") or []), *parents]
        return entity, attrs

    def inputs(
        self,
        claims: Mapping[str, Any] | None,
        feature: str,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        backend: str | None = None,
        *,
        trim: bool = True,
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """What Cedar is asked: principal entity, resource entity, context. `trim=False` keeps the
        attributes no policy reads (the reference the equivalence tests compare against)."""
        action = FEATURES[feature][0]
        entity_keep = self._usage.entity_attrs if trim else None
        principal, claim_attrs = self._principal(claims, entity_keep, self._usage.hierarchy or not trim)
        context_keep = self._usage.context_attrs if trim and not self._usage.whole_context else None
        if context_keep != entity_keep:
            claim_attrs = _prefixed("claim_", claims, context_keep)
        context = {**claim_attrs, **_prefixed("arg_", arguments, context_keep)}
        rtype = FEATURES[feature][1]
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
        return principal, resource, context

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
        principal, resource, context = self.inputs(claims, feature, name, arguments, backend, trim=self._trim)
        try:
            principal_key = orjson.dumps([principal])
            resource_key = orjson.dumps([resource])
            context_json = orjson.dumps(context)
        except orjson.JSONEncodeError as exc:
            # Text Cedar cannot hold (a lone surrogate from a lenient JSON parser): refuse.
            return Decision(False, f"evaluation failed: {exc}")
        # JSON text never holds a raw NUL (orjson escapes it): the parts cannot run into each other.
        key = b"%s\x00%s\x00%s\x00%s" % (principal_key, resource_key, action.encode(), context_json)
        cacheable = self._cache and len(key) <= DECISION_KEY_MAX
        if cacheable:
            cached = self._decisions.get(key)
            if cached is not None:
                self._decisions.move_to_end(key)
                self.cache_hits += 1
                return cached
        decision = self._decide(
            principal, resource, action, context_json, policies, principal_key, resource_key
        )
        if cacheable:
            self._decisions[key] = decision
            if len(self._decisions) > DECISION_CACHE_SIZE:
                self._decisions.popitem(last=False)
        return decision

    def _decide(
        self,
        principal: dict[str, Any],
        resource: dict[str, Any],
        action: str,
        context_json: bytes,
        policies: cedarpy.PolicySet,
        principal_key: bytes,
        resource_key: bytes,
    ) -> Decision:
        request = {
            "principal": principal["uid"],
            "action": {"type": "Action", "id": action},
            "resource": resource["uid"],
        }
        if context_json != b"{}":
            # Absent means empty to cedarpy (and costs Cedar no parse). As text: cedarpy would
            # serialize a dict with the stdlib's (slower) json on each call.
            request["context"] = context_json.decode()
        try:
            answer = decide(request, policies, self._entities(principal_key, resource_key))
        except ValueError as exc:
            # E.g. a static entity naming the same uid as a group parent: refuse, never fail open.
            return Decision(False, f"evaluation failed: {exc}")
        if answer.allowed:
            return Decision(True, "permitted")
        if answer.reasons:
            return Decision(False, "a forbid policy applies")
        if answer.errors:
            # A policy that errors does not apply (Cedar): reported, since it is usually a typo.
            return Decision(False, "no policy permits it; errors: " + "; ".join(map(str, answer.errors)))
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
