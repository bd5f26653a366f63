"""The fast authorization path decides exactly as plain Cedar does.

`Authorizer.authorize` indexes policies by scope, trims the attributes no policy reads and caches
decisions; the reference here is one `cedarpy.is_authorized` call on the whole policy text with
untrimmed entities and context (no handle, no cache). Generated policy sets mix scoped and
unscoped permits and forbids, `when` / `unless`, conditions that error, and whole-context uses;
generated requests mix claims, arguments (nested, odd types), features, names and backends.
"""

from __future__ import annotations

import json
from typing import Any

import cedarpy
import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mcpfleet.policy import cedar, cedar_call
from mcpfleet.policy.cedar import Authorizer
from mcpfleet.policy.config import parse_document
from mcpfleet.policy.engine import PolicyEngine

TOOLS = ["t0", "t1", "t2"]
BACKENDS = ["b0", "b1"]
STATIC = [
    {"uid": {"type": "Tool", "id": "t0"}, "attrs": {"owner": "alice"}, "parents": []},
    {"uid": {"type": "THVGroup", "id": "admin"}, "attrs": {}, "parents": []},
]

PRINCIPALS = ["principal", 'principal == Client::"alice"', 'principal in THVGroup::"admin"']
ACTIONS = [
    "action",
    'action == Action::"call_tool"',
    'action in [Action::"call_tool", Action::"get_prompt"]',
    'action == Action::"read_resource"',
]
RESOURCES = [
    "resource",
    'resource == Tool::"t0"',
    "resource is Tool",
    'resource in Backend::"b0"',
    "resource is Prompt",
]
CONDITIONS = [
    "true",
    'context.arg_text == "x"',
    "context has arg_n",
    "context.arg_n > 3",  # errors when missing or not a Long
    'principal.claim_roles.contains("admin")',
    "principal has claim_email",
    "context.claim_level >= 2",
    "context == {}",
    'context == {"arg_text": "x"}',
    "context has claim_sub",
    'resource.name == "t1"',
    'resource.backend == "b0"',
    "resource has backend",
    'principal.claim_sub == "alice"',
    "resource has owner && resource.owner == principal.claim_sub",
    'context["arg_flag"] == true',
    "principal.claim_level == context.claim_level",
]


@st.composite
def policy(draw: st.DrawFn) -> str:
    effect = draw(st.sampled_from(["permit", "forbid"]))
    head = f"{effect}({draw(st.sampled_from(PRINCIPALS))}, {draw(st.sampled_from(ACTIONS))}, {draw(st.sampled_from(RESOURCES))})"
    clauses = draw(
        st.lists(st.tuples(st.sampled_from(["when", "unless"]), st.sampled_from(CONDITIONS)), max_size=2)
    )
    return head + "".join(f" {kind} {{ {cond} }}" for kind, cond in clauses) + ";"


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["x", "alice", "admin", ""]),
    st.text(max_size=8),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "__entity", "__extn", "id", "type"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def claims(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    out: dict[str, Any] = {}
    sub = draw(st.sampled_from(["alice", "bob", None, 7]))
    if sub is not None:
        out["sub"] = sub
    if draw(st.booleans()):
        out["roles"] = draw(st.lists(st.sampled_from(["admin", "user", 3]), max_size=3))
    if draw(st.booleans()):
        out["groups"] = draw(
            st.one_of(st.sampled_from(["admin", "user"]), st.lists(st.sampled_from(["admin"])))
        )
    if draw(st.booleans()):
        out["email"] = "a@example.com"
    if draw(st.booleans()):
        out["level"] = draw(st.one_of(st.integers(0, 4), st.sampled_from(["2", 2.5])))
    out.update(draw(st.dictionaries(st.sampled_from(["iss", "aud", "extra"]), json_value, max_size=2)))
    return out


arguments = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["text", "n", "flag", "other"]), json_value, max_size=4),
    st.fixed_dictionaries(
        {"text": st.sampled_from(["x", "y"]), "n": st.integers(0, 6), "flag": st.booleans()}
    ),
)


@st.composite
def request(draw: st.DrawFn) -> tuple[Any, str, str, Any, str | None]:
    return (
        draw(claims()),
        draw(st.sampled_from(["tool", "prompt", "resource"])),
        draw(st.sampled_from(TOOLS)),
        draw(arguments),
        draw(st.sampled_from([None, *BACKENDS])),
    )


def reference(authorizer: Authorizer, policies: list[str], req: tuple[Any, str, str, Any, str | None]) -> Any:
    """Plain Cedar: the whole policy text, every attribute, entities as a JSON list, no cache."""
    claims_, feature, name, args, backend = req
    principal, resource, context = authorizer.inputs(claims_, feature, name, args, backend, trim=False)
    kept = [e for e in STATIC if e["uid"]["type"] not in cedar.GENERATED_TYPES]
    entities = json.dumps([*kept, principal, resource])  # as cedarpy writes a list: the stdlib's json
    action = cedar.FEATURES[feature][0]
    return cedarpy.is_authorized(
        {
            "principal": principal["uid"],
            "action": {"type": "Action", "id": action},
            "resource": resource["uid"],
            "context": context,
        },
        "\n".join(policies),
        entities,
    )


def build(policies: list[str]) -> Authorizer:
    doc = {
        "version": "1.0",
        "type": "cedarv1",
        "cedar": {"policies": policies, "entities_json": orjson.dumps(STATIC).decode()},
    }
    return Authorizer(parse_document(doc, "test"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(policy(), min_size=1, max_size=8), st.lists(request(), min_size=1, max_size=6))
def test_fast_path_decides_as_plain_cedar(policies: list[str], requests: list[Any]) -> None:
    authorizer = build(policies)
    for req in [*requests, *requests]:  # the second pass is answered from the cache
        got = authorizer.authorize(*req)
        event(
            f"allowed={got.allowed} whole_context={authorizer._usage.whole_context} "
            f"hierarchy={authorizer._usage.hierarchy}"
        )
        try:
            want = reference(authorizer, policies, req)
        except ValueError:  # text Cedar cannot hold (a lone surrogate): refused, never allowed
            assert not got.allowed and got.reason.startswith("evaluation failed"), (req, got)
            continue
        assert got.allowed == want.allowed, (policies, req, got, want.diagnostics.errors)
        if not got.allowed:
            forbid = bool(want.diagnostics.reasons)
            assert got.reason.startswith("a forbid") == forbid, (policies, req, got)


def test_usage_finds_whole_context_and_attributes() -> None:
    a = build(
        ['permit(principal, action, resource) when { context.arg_text == "x" && principal.claim_r == 1 };']
    )
    assert a._usage.attrs == {"arg_text", "claim_r"} and not a._usage.whole_context
    assert a._usage.context_attrs == {"arg_text"} and a._usage.entity_attrs == {"claim_r"}
    assert not a._usage.hierarchy
    # Read on the principal only: not in the context; read in the context only: not on the principal.
    principal, _, context = a.inputs({"sub": "a", "r": 1, "groups": ["g"]}, "tool", "t0", {"text": "x"})
    assert principal["attrs"] == {"claim_r": 1} and context == {"arg_text": "x"}
    assert principal["parents"] == []  # no policy uses `in`: parents are unobservable
    b = build(["permit(principal, action, resource) unless { context == {} };"])
    assert b._usage.whole_context
    principal, _, context = b.inputs({"sub": "a", "x": 1}, "tool", "t0", {"y": 2})
    assert context == {"claim_sub": "a", "claim_x": 1, "arg_y": 2} and principal["attrs"] == {}
    for text in (
        'permit(principal in THVGroup::"g", action, resource);',
        'permit(principal, action, resource) when { principal in THVGroup::"g" };',
        'permit(principal is Client in THVGroup::"g", action, resource);',
    ):
        c = build([text])
        assert c._usage.hierarchy, text
        principal, _, _ = c.inputs({"sub": "a", "groups": ["g"]}, "tool", "t0")
        assert principal["parents"] == [{"type": "THVGroup", "id": "g"}]
        assert c.authorize({"sub": "a", "groups": ["g"]}, "tool", "t0").allowed
        assert not c.authorize({"sub": "a", "groups": ["h"]}, "tool", "t0").allowed


def test_the_direct_extension_call_is_used_and_answers_as_the_public_api() -> None:
    """`cedar_call` calls cedarpy's extension directly only when it answers as `is_authorized` does;
    with the installed cedarpy it must (else every decision pays the wrapper)."""
    assert cedar_call._direct_agrees()
    a = build(
        [
            "permit(principal, action, resource) when { context.arg_n > 1 };",
            'forbid(principal, action, resource == Tool::"t2");',
        ]
    )
    request = {
        "principal": {"type": "Client", "id": "u"},
        "action": {"type": "Action", "id": "call_tool"},
        "resource": {"type": "Tool", "id": "t0"},
    }
    policies = cedarpy.PolicySet.from_str("\n".join(a.policies))
    entities = cedarpy.Entities.from_json_str("[]")
    for tool, context in (
        ("t0", '{"arg_n": 2}'),
        ("t0", "{}"),
        ("t2", '{"arg_n": 2}'),
        ("t1", '{"arg_n": 0}'),
    ):
        req = {**request, "resource": {"type": "Tool", "id": tool}, "context": context}
        assert cedar_call._direct(req, policies, entities) == cedar_call._public(req, policies, entities)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(policy(), min_size=1, max_size=6), st.lists(request(), min_size=1, max_size=4))
def test_the_public_api_fallback_decides_as_plain_cedar(policies: list[str], requests: list[Any]) -> None:
    """The path kept for a cedarpy whose extension answers otherwise: the same decisions."""
    saved = cedar_call._decide
    cedar_call._decide = cedar_call._public
    try:
        authorizer = build(policies)
        for req in requests:
            got = authorizer.authorize(*req)
            try:
                want = reference(authorizer, policies, req)
            except ValueError:
                assert not got.allowed and got.reason.startswith("evaluation failed"), (req, got)
                continue
            assert got.allowed == want.allowed, (policies, req, got)
    finally:
        cedar_call._decide = saved


def test_large_inputs_bypass_the_cache_and_still_decide() -> None:
    a = build(['permit(principal, action, resource) when { context.arg_text like "a*" };'])
    big = {"text": "a" * (cedar.DECISION_KEY_MAX + 10)}
    assert a.authorize({"sub": "u"}, "tool", "t1", big).allowed
    assert a.authorize({"sub": "u"}, "tool", "t1", big).allowed
    assert a.cache_hits == 0 and not a._decisions
    assert not a.authorize({"sub": "u"}, "tool", "t1", {"text": "b" * 10_000}).allowed
    # Arguments no policy reads do not reach Cedar (nor the key): the cache still serves them.
    assert a.authorize({"sub": "u"}, "tool", "t1", {"text": "ab", "blob": "z" * 100_000}).allowed
    assert a.authorize({"sub": "u"}, "tool", "t1", {"text": "ab", "blob": "w" * 100_000}).allowed
    assert a.cache_hits == 1


def test_cache_is_bounded() -> None:
    a = build(["permit(principal, action, resource) when { context has arg_n };"])
    for i in range(cedar.DECISION_CACHE_SIZE + 50):
        assert a.authorize({"sub": "u"}, "tool", "t1", {"n": i}).allowed
    assert len(a._decisions) == cedar.DECISION_CACHE_SIZE
    for i in range(cedar.RESOURCE_CACHE_SIZE + 20):
        assert a.authorize({"sub": "u"}, "tool", f"tool{i}", {"n": 1}).allowed
    assert len(a._resource_entities) == cedar.RESOURCE_CACHE_SIZE
    assert len(a._entity_cache) == cedar.ENTITY_CACHE_SIZE


def test_a_policy_change_is_not_answered_from_the_old_cache() -> None:
    permit = {
        "version": "1.0",
        "type": "cedarv1",
        "cedar": {"policies": ["permit(principal, action, resource);"]},
    }
    forbid = {
        "version": "1.0",
        "type": "cedarv1",
        "cedar": {
            "policies": ["permit(principal, action, resource);", "forbid(principal, action, resource);"]
        },
    }
    engine = PolicyEngine(parse_document(permit, "test"))
    assert engine.authorizer().authorize({"sub": "u"}, "tool", "t1").allowed
    assert engine.authorizer().authorize({"sub": "u"}, "tool", "t1").allowed
    engine.replace(parse_document(forbid, "test"))
    assert not engine.authorizer().authorize({"sub": "u"}, "tool", "t1").allowed
