"""One descriptor per kind: every kind of `api` has its rows and each row is complete; the kinds'
names are written only in `api/`, `reconcile/` and the kind's own render module.

Adding a kind is its model, its rules and one row in each table (`api.kinds.DESCRIPTORS`,
`reconcile.kinds.RULES`, and for a workload the renderer in `platform/kubernetes/render`): these
tests name what is missing when a row is forgotten or incomplete.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
import re
import typing
from pathlib import Path

import pytest

import mcpfleet.api
from mcpfleet.api import kindnames
from mcpfleet.api.kinds import (
    ALL_KINDS,
    DESCRIPTORS,
    MEMBER_KINDS,
    PUBLISHED_KINDS,
    WORKLOAD_KINDS,
    KindDescriptor,
    Role,
    parse_manifest,
)
from mcpfleet.api.meta import RefersTo
from mcpfleet.api.references import names_at, references
from mcpfleet.api.resource import Resource
from mcpfleet.api.versions import STORAGE_API_VERSION
from mcpfleet.operator.store import Entry
from mcpfleet.platform.kubernetes.render import RENDERERS
from mcpfleet.reconcile.kinds import RULES, RULES_BY_KIND
from mcpfleet.reconcile.model import World

SRC = Path(mcpfleet.api.__file__).resolve().parents[1]
ALLOWED_DIRS = ("api/", "reconcile/")


def _api_kinds() -> set[type[Resource]]:
    """Every Resource model defined in an `api` module (imported here, not taken from the table)."""
    for module in pkgutil.iter_modules(mcpfleet.api.__path__):
        if module.name not in ("conversion", "__main__"):
            importlib.import_module(f"mcpfleet.api.{module.name}")
    found: set[type[Resource]] = set()
    todo = list(Resource.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "info" in cls.__dict__ and cls.__module__.startswith("mcpfleet.api."):
            found.add(cls)
    return found


def test_every_api_kind_has_one_descriptor_and_one_rules_row() -> None:
    kinds = _api_kinds()
    assert len(kinds) >= 14
    assert set(ALL_KINDS) == kinds, "a kind without a row in api.kinds.DESCRIPTORS"
    assert len({d.kind for d in DESCRIPTORS}) == len(DESCRIPTORS), "a kind with two descriptors"
    assert [r.model for r in RULES if r.model in kinds] == [r.model for r in RULES]
    assert {r.model for r in RULES} == kinds, "a kind without a row in reconcile.kinds.RULES"
    assert len(RULES_BY_KIND) == len(RULES)


def test_each_model_names_its_kind_and_the_descriptor_shows_it() -> None:
    for descriptor in DESCRIPTORS:
        model = descriptor.model
        assert model.KIND == model.info.kind == descriptor.kind
        assert typing.get_args(model.model_fields["kind"].annotation) == (descriptor.kind,)
        assert descriptor.plural == model.info.plural
        assert descriptor.short_names == model.info.short_names


@pytest.mark.parametrize("descriptor", DESCRIPTORS, ids=lambda d: d.kind)
def test_each_descriptor_is_complete_for_its_role(descriptor: KindDescriptor) -> None:
    rules = RULES_BY_KIND[descriptor.kind]
    assert rules.descriptor is descriptor
    if descriptor.role is Role.WORKLOAD:
        assert rules.plan is not None and rules.status is not None, "a workload needs plan and status rules"
        assert descriptor.child_prefix, "a workload's children need a name prefix"
        assert descriptor.apply_order is not None, "a workload needs its place in the apply order"
        assert descriptor.model in RENDERERS, "a workload needs a Kubernetes renderer"
        assert rules.config_status is None
    else:
        assert rules.plan is None and rules.status is None
        assert descriptor.child_prefix is None and descriptor.apply_order is None
        assert descriptor.model not in RENDERERS
    if descriptor.role is Role.CONFIG:
        assert rules.config_status is not None, "a configuration kind needs its status rule"
        assert rules.world_field is not None and rules.world_by_name, (
            "workloads look configurations up by name"
        )
    else:
        assert rules.config_status is None and rules.own_status_fields is None
    if descriptor.role in (Role.GROUP, Role.ENTRY):
        assert rules.world_field is not None, "groups and entries are read by the gateways' rules"
    if descriptor.group_member:
        assert any(r.kind == kindnames.MCP_GROUP for r in descriptor.references), "a member names its group"


def test_world_fields_of_the_rules_rows_exist_and_are_distinct() -> None:
    world_fields = {f.name for f in dataclasses.fields(World)}
    named = [r.world_field for r in RULES if r.world_field is not None]
    assert len(named) == len(set(named))
    assert set(named) <= world_fields


def test_child_prefixes_and_apply_order_are_distinct() -> None:
    workloads = [d for d in DESCRIPTORS if d.role is Role.WORKLOAD]
    assert len({d.child_prefix for d in workloads}) == len(workloads)
    assert sorted(d.apply_order or 0 for d in workloads) == list(range(len(workloads)))
    assert set(RENDERERS) == {d.model for d in workloads}
    # The embedding servers first, the gateways and registries after the servers they list.
    assert WORKLOAD_KINDS.index(kindnames.EMBEDDING_SERVER) < WORKLOAD_KINDS.index(kindnames.MCP_SERVER)
    assert WORKLOAD_KINDS.index(kindnames.MCP_SERVER) < WORKLOAD_KINDS.index(kindnames.VIRTUAL_MCP_SERVER)


def test_the_light_kind_names_agree_with_the_descriptors() -> None:
    """`api.kindnames` (for the data plane, without the models) says what the descriptors say."""
    assert kindnames.MEMBER_KINDS == MEMBER_KINDS
    assert kindnames.PUBLISHED_KINDS == PUBLISHED_KINDS
    assert set(kindnames.WORKLOAD_KINDS) == set(WORKLOAD_KINDS)
    assert typing.get_args(kindnames.MemberKind) == MEMBER_KINDS
    by_kind = {d.kind: d for d in DESCRIPTORS}
    for kind, plural in kindnames.PLURALS.items():
        assert by_kind[kind].plural == plural
    constants = [v for k, v in vars(kindnames).items() if k.isupper() and isinstance(v, str)]
    assert constants and set(constants) <= set(by_kind)


def test_references_are_derived_from_the_marked_fields() -> None:
    """Every `RefersTo` mark names a kind; the paths are the wire paths, in both served versions."""
    kinds = {d.kind for d in DESCRIPTORS}
    for descriptor in DESCRIPTORS:
        for ref in references(descriptor.model):
            assert ref.kind in kinds, f"{descriptor.kind}.spec.{'.'.join(ref.path)} names an unknown kind"
    server = {(r.kind, r.path) for r in DESCRIPTORS[0].references}
    assert DESCRIPTORS[0].kind == kindnames.MCP_SERVER
    assert (kindnames.MCP_GROUP, ("groupRef",)) in server
    assert ("MCPToolConfig", ("toolConfigRef",)) in server
    gateway = next(d for d in DESCRIPTORS if d.kind == kindnames.VIRTUAL_MCP_SERVER)
    assert (kindnames.MCP_GROUP, ("config", "groupRef")) in {(r.kind, r.path) for r in gateway.references}
    stored = {(r.kind, r.path) for r in gateway.references_in(STORAGE_API_VERSION)}
    assert (kindnames.MCP_GROUP, ("groupRef", "name")) in stored
    assert ("MCPExternalAuthConfig", ("outgoingAuth", "backends", "*", "externalAuthConfigRef")) in stored


def test_reference_paths_find_the_names_in_a_real_manifest() -> None:
    """The derived paths read the names of a manifest's references (lists and maps included)."""
    manifest = {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": kindnames.VIRTUAL_MCP_SERVER,
        "metadata": {"name": "gw"},
        "spec": {
            "config": {
                "groupRef": "team",
                "compositeToolRefs": [{"name": "c1"}, {"name": "c2"}],
                "aggregation": {"tools": [{"workload": "a", "toolConfigRef": {"name": "tc"}}]},
            },
            "incomingAuth": {"type": "anonymous"},
            "outgoingAuth": {
                "source": "inline",
                "backends": {
                    "a": {"type": "external_auth_config_ref", "externalAuthConfigRef": {"name": "x"}}
                },
            },
        },
    }
    model = parse_manifest(manifest)
    spec = model.dump()["spec"]
    found = {
        (r.kind, n)
        for r in next(d for d in DESCRIPTORS if d.model is type(model)).references
        for n in names_at(spec, r.path)
    }
    assert found == {
        (kindnames.MCP_GROUP, "team"),
        ("VirtualMCPCompositeToolDefinition", "c1"),
        ("VirtualMCPCompositeToolDefinition", "c2"),
        ("MCPToolConfig", "tc"),
        ("MCPExternalAuthConfig", "x"),
    }


def test_a_refers_to_mark_is_plain_metadata() -> None:
    """The mark changes no schema: the CRDs stay generated from the same JSON schema."""
    field = next(d for d in DESCRIPTORS if d.kind == kindnames.MCP_SERVER).model.model_fields["spec"]
    spec_model = typing.cast(type, field.annotation)
    marked = spec_model.model_fields["tool_config_ref"]
    assert RefersTo("MCPToolConfig") in marked.metadata
    assert "RefersTo" not in str(spec_model.model_json_schema())


def _kind_literals(path: Path) -> list[tuple[int, str]]:
    names = {d.kind for d in DESCRIPTORS}
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def _render_module_of(relative: str) -> str | None:
    """The kind whose own render module `relative` is (`platform/kubernetes/render/<kind>.py`)."""
    prefix = "platform/kubernetes/render/"
    if not relative.startswith(prefix):
        return None
    stem = relative.removeprefix(prefix).removesuffix(".py")
    return next((d.kind for d in DESCRIPTORS if d.kind.lower() == stem), None)


def test_kind_names_are_written_only_in_api_reconcile_and_their_render_module() -> None:
    """A kind's name as a string literal (`"MCPServer"`) appears only in `api/`, `reconcile/` and
    that kind's render module: everywhere else code asks a descriptor or a model's `KIND`."""
    offenders = []
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 100
    for path in files:
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(ALLOWED_DIRS):
            continue
        own = _render_module_of(relative)
        offenders += [f"{relative}:{line}: {value!r}" for line, value in _kind_literals(path) if value != own]
    assert not offenders, (
        "kind names written outside api/, reconcile/ and their render module:\n" + "\n".join(offenders)
    )


def test_templates_name_kinds_through_their_globals() -> None:
    """The console's templates compare and link kinds through the globals the console sets
    (`GATEWAY_KIND`, ...), never a quoted kind name or a `kind=` query value written out."""
    names = "|".join(sorted((d.kind for d in DESCRIPTORS), key=len, reverse=True))
    quoted = re.compile(rf"""(?<=['"=])({names})(?=['"&])""")
    templates = sorted((SRC / "console" / "templates").rglob("*.html"))
    assert templates
    offenders = [
        f"{path.relative_to(SRC)}: {match.group(0)}"
        for path in templates
        for match in quoted.finditer(path.read_text())
    ]
    assert not offenders, offenders
    assert quoted.search("""{% if kind == 'MCPServer' %}""")
    assert not quoted.search("in a VirtualMCPServer's spec")


def test_the_literal_scan_finds_a_kind_name(tmp_path: Path) -> None:
    """The scan above is not vacuous: it reports a literal, in a comparison and in an annotation."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import Literal\n"
        "def f(kind: str) -> bool:\n"
        "    return kind == 'MCPServer'\n"
        "X: Literal['MCPRemoteProxy'] = 'MCPRemoteProxy'\n"
        "Y = 'an MCPServer in a sentence'\n"
    )
    assert sorted(_kind_literals(sample)) == [(3, "MCPServer"), (4, "MCPRemoteProxy"), (4, "MCPRemoteProxy")]
    assert _render_module_of("platform/kubernetes/render/mcpserver.py") == kindnames.MCP_SERVER
    assert _render_module_of("platform/kubernetes/render/objects.py") is None


def _entry(kind: str, spec: dict[str, object], api_version: str = STORAGE_API_VERSION) -> Entry:
    raw = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": spec,
    }
    return Entry(raw, None, None)


def test_the_operator_follows_the_derived_references_in_both_stored_forms() -> None:
    """The operator's dependency tracking reads the references the models mark, over raw objects in
    the storage version (ToolHive's `groupRef: {name}`) and in the hub shape alike."""
    from mcpfleet.operator.controller import _group_ref, _refs

    stored_gateway = _entry(
        kindnames.VIRTUAL_MCP_SERVER,
        {
            "groupRef": {"name": "team"},
            "incomingAuth": {"type": "oidc", "oidcConfigRef": {"name": "idp", "audience": "a"}},
            "outgoingAuth": {"backends": {"b": {"externalAuthConfigRef": {"name": "tokens"}}}},
            "embeddingServerRef": {"name": "emb"},
        },
    )
    assert _group_ref(stored_gateway) == "team"
    assert _refs(stored_gateway) == {
        ("MCPOIDCConfig", "idp"),
        ("MCPExternalAuthConfig", "tokens"),
        (kindnames.EMBEDDING_SERVER, "emb"),
    }
    hub_gateway = _entry(
        kindnames.VIRTUAL_MCP_SERVER, {"config": {"groupRef": "team"}}, "mcpfleet.dev/v1alpha1"
    )
    assert _group_ref(hub_gateway) == "team"
    server = _entry(kindnames.MCP_SERVER, {"groupRef": "g", "authServerRef": {"name": "as"}})
    assert _group_ref(server) == "g"
    assert _refs(server) == {("MCPExternalAuthConfig", "as")}
    assert _group_ref(_entry(kindnames.MCP_SERVER, {"groupRef": {"name": "g2"}})) == "g2"
    assert _refs(_entry("NotAKind", {"toolConfigRef": {"name": "t"}})) == set()
