"""A permission profile resolved per platform (`reconcile/permissions.py`) and rendered on Kubernetes
(`render/permissions.py`): the securityContext, the scratch volume and the egress NetworkPolicy."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import mcpserver
from mcpfleet.reconcile.model import Images, World

PROFILE_CM = ("prof", "p.json")


def _server(spec: dict[str, Any]) -> Any:
    return parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": "time", "namespace": "ns"},
            "spec": {"image": "uvx://mcp-server-time", **spec},
        }
    )


def _plan(spec: dict[str, Any], platform: str = "kubernetes", document: str | None = None) -> Any:
    documents = {PROFILE_CM: document} if document is not None else {}
    world = World(platform=platform, namespace="ns", profile_documents=documents)  # type: ignore[arg-type]
    return mcpserver.plan(_server(spec), world)


def _rendered(spec: dict[str, Any], document: str | None = None) -> list[dict[str, Any]]:
    plan = _plan(spec, document=document)
    assert not plan.problems
    return render(plan, Owner("MCPServer", "time", "ns", "uid-1"), Images(runner="runner:1"))


def _render(spec: dict[str, Any], document: str | None = None) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in _rendered(spec, document)}


def _configmap() -> dict[str, Any]:
    return {"permissionProfile": {"type": "configmap", "name": PROFILE_CM[0], "key": PROFILE_CM[1]}}


def _condition(plan: Any) -> tuple[str, str, str, str]:
    return next(c for c in plan.conditions if c[0] == "Permissions")


@pytest.mark.parametrize("platform", ["local", "kubernetes"])
def test_default_is_builtin_network_and_status_says_so(platform: str) -> None:
    plan = _plan({}, platform)
    assert not plan.problems
    assert plan.containers[0].permission_profile is not None
    condition = _condition(plan)
    assert condition[1] == "True"
    assert condition[3].startswith("builtin network (default): outbound network open; files: own work folder")


def test_restricted_security_context_on_the_runner_and_no_policy_with_open_network() -> None:
    children = _render({})
    container = children["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": False,  # uv / npm write their caches under the runner's HOME
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert "NetworkPolicy" not in children


def test_none_denies_all_egress() -> None:
    children = _render({"permissionProfile": {"name": "none"}})
    policy = children["NetworkPolicy"]
    assert policy["metadata"]["name"] == children["Deployment"]["metadata"]["name"]
    assert policy["spec"] == {
        "podSelector": {"matchLabels": children["Deployment"]["spec"]["selector"]["matchLabels"]},
        "policyTypes": ["Egress"],
        "egress": [],
    }


def test_allow_port_allows_those_ports_and_dns() -> None:
    document = '{"network": {"outbound": {"allow_port": [443, 8443]}}}'
    children = _render(_configmap(), document)
    ports = children["NetworkPolicy"]["spec"]["egress"][0]["ports"]
    assert {"protocol": "TCP", "port": 443} in ports and {"protocol": "TCP", "port": 8443} in ports
    assert {"protocol": "UDP", "port": 53} in ports
    assert len(children["NetworkPolicy"]["spec"]["egress"]) == 1


HOSTS = '{"network": {"outbound": {"allow_host": [".example.com"], "allow_port": [443]}}}'


def test_allow_host_on_kubernetes_goes_through_an_egress_proxy_of_its_own() -> None:
    children = {(m["kind"], m["metadata"]["name"]): m for m in _rendered(_configmap(), HOSTS)}
    server_pods = children[("Deployment", "mcp-time")]["spec"]["selector"]["matchLabels"]
    proxy_pods = {"app.kubernetes.io/instance": "time", "mcpfleet.dev/kind": "mcpserver-egress"}
    # The server's pods reach the proxy (and DNS to find it), nothing else.
    assert children[("NetworkPolicy", "mcp-time")]["spec"]["egress"] == [
        {"to": [{"podSelector": {"matchLabels": proxy_pods}}], "ports": [{"protocol": "TCP", "port": 3128}]},
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
    ]
    container = children[("Deployment", "mcp-time")]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HTTPS_PROXY"] == env["HTTP_PROXY"] == "http://mcp-time-egress.ns.svc:3128"
    # The proxy: the runner image running the filter with the profile's lists, restricted, no token.
    proxy = children[("Deployment", "mcp-time-egress")]
    pod = proxy["spec"]["template"]
    assert proxy["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"] == proxy_pods
    assert pod["spec"]["automountServiceAccountToken"] is False
    (egress,) = pod["spec"]["containers"]
    assert egress["image"] == "runner:1"
    assert egress["command"][3:] == [
        "mcpfleet.platform.local.egress",
        "serve",
        "--listen=0.0.0.0:3128",
        "--allow-host=.example.com",
        "--allow-port=443",
    ]
    assert egress["securityContext"]["readOnlyRootFilesystem"] is True
    assert (
        proxy["metadata"]["ownerReferences"]
        == children[("Deployment", "mcp-time")]["metadata"]["ownerReferences"]
    )
    assert children[("Service", "mcp-time-egress")]["spec"]["selector"] == proxy_pods
    assert proxy_pods.items() - server_pods.items()  # the server's Service never selects the proxy
    hashes = {m["metadata"]["annotations"]["mcpfleet.dev/applied-hash"] for m in children.values()}
    assert len(hashes) == len(children)  # each object stamped on its own metadata
    # Only the server's pods may use it.
    ingress = children[("NetworkPolicy", "mcp-time-egress")]["spec"]
    assert ingress["podSelector"] == {"matchLabels": proxy_pods}
    assert ingress["ingress"][0]["from"] == [{"podSelector": {"matchLabels": server_pods}}]


def test_allow_host_needs_room_for_the_egress_proxy_name() -> None:
    name = "x" * 56  # mcp-<name> fits in 63 characters, mcp-<name>-egress does not
    server = parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"image": "uvx://mcp-server-time", **_configmap()},
        }
    )
    world = World(platform="kubernetes", namespace="ns", profile_documents={PROFILE_CM: HOSTS})
    plan = mcpserver.plan(server, world)
    assert any("egress proxy Service mcp-" in p and "shorten metadata.name" in p for p in plan.problems)


def test_oci_image_read_only_root_with_scratch_tmp_and_attach_egress() -> None:
    children = _render({"image": "ghcr.io/example/server:1", "permissionProfile": {"name": "none"}})
    pod = children["Deployment"]["spec"]["template"]["spec"]
    mcp = next(c for c in pod["containers"] if c["name"] == "mcp")
    runner = next(c for c in pod["containers"] if c["name"] == "proxy")
    assert mcp["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "mcp-tmp", "mountPath": "/tmp"} in mcp["volumeMounts"]
    assert {"name": "mcp-tmp", "emptyDir": {}} in pod["volumes"]
    assert "securityContext" not in runner  # mcpfleet's own runner beside the server: not the server
    # The runner attaches through the API server: the pod keeps that egress only.
    assert children["NetworkPolicy"]["spec"]["egress"] == [
        {"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}
    ]


@pytest.mark.parametrize(
    ("spec", "platform", "document", "expected"),
    [
        (_configmap(), "local", None, "spec.permissionProfile: ConfigMap prof key p.json not found"),
        (_configmap(), "kubernetes", "{", "spec.permissionProfile: ConfigMap prof key p.json: not JSON"),
        (
            _configmap(),
            "local",
            '{"network": {"outbound": {"insecure_allow_all": true, "allow_port": [1]}}}',
            "p.json: network.outbound: insecure_allow_all opens every host and port",
        ),
        (
            {"transport": "streamable-http", "mcpPort": 9000, "permissionProfile": {"name": "none"}},
            "local",
            None,
            "an http server (streamable-http) is reached over the network",
        ),
    ],
)
def test_profiles_a_platform_cannot_enforce_are_refused(
    spec: dict[str, Any], platform: str, document: str | None, expected: str
) -> None:
    plan = _plan(spec, platform, document)
    assert any(expected in p for p in plan.problems), plan.problems
    assert plan.containers == ()  # never run with less isolation than asked
    assert _condition(plan)[1] == "False"


def test_allow_lists_run_locally_behind_the_egress_filter() -> None:
    document = '{"network": {"outbound": {"allow_host": [".example.com"], "allow_port": [443]}}}'
    plan = _plan(_configmap(), "local", document)
    assert not plan.problems
    assert _condition(plan)[3].endswith(
        "outbound only to .example.com, port 443; files: own work folder only"
    )


def test_configmap_profile_applies() -> None:
    plan = _plan(_configmap(), "local", '{"read": ["/srv/data"]}')
    assert not plan.problems
    assert plan.containers[0].permission_profile.read == ("/srv/data",)
    assert (
        _condition(plan)[3]
        == "configmap prof/p.json: no network; files: own work folder only, read ['/srv/data']"
    )


class _Api:
    """The one call the operator makes for a configmap profile: GET the ConfigMap."""

    def __init__(self, found: dict[str, Any] | None) -> None:
        self.found = found
        self.asked: list[tuple[str, str, str, str]] = []

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.asked.append((api_version, kind, namespace, name))
        return self.found


async def test_operator_reads_the_profile_key_of_the_configmap() -> None:
    from types import SimpleNamespace

    from mcpfleet.operator.controller import Controller

    server = _server(_configmap())
    api = _Api({"data": {"p.json": '{"read": ["/x"]}', "other": "{}"}})
    documents = await Controller._profile_documents(SimpleNamespace(api=api), "ns", server)  # type: ignore[arg-type]
    assert documents == {PROFILE_CM: '{"read": ["/x"]}'}
    assert api.asked == [("v1", "ConfigMap", "ns", "prof")]
    missing = await Controller._profile_documents(SimpleNamespace(api=_Api(None)), "ns", server)  # type: ignore[arg-type]
    assert missing == {}  # then the plan names the missing key (test above)
    builtin = _server({"permissionProfile": {"name": "none"}})
    unasked = _Api(None)
    assert await Controller._profile_documents(SimpleNamespace(api=unasked), "ns", builtin) == {}  # type: ignore[arg-type]
    assert unasked.asked == []


VOLUMES = {
    "volumes": [
        {"name": "data", "hostPath": "/srv/data", "mountPath": "/data", "readOnly": True},
        {"name": "out", "hostPath": "/srv/out", "mountPath": "/out"},
    ]
}


def _pod(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    pod: dict[str, Any] = objects["Deployment"]["spec"]["template"]["spec"]
    return pod


def test_volumes_are_host_path_pod_volumes_mounted_into_the_server_container() -> None:
    pod = _pod(_render(VOLUMES))
    host = [v for v in pod["volumes"] if "hostPath" in v]
    assert host == [
        {"name": "host-data", "hostPath": {"path": "/srv/data"}},
        {"name": "host-out", "hostPath": {"path": "/srv/out"}},
    ]
    # A stdio package runs as the proxy's child: the mounts are on that container (the only one).
    (container,) = pod["containers"]
    mounts = [m for m in container["volumeMounts"] if m["name"].startswith("host-")]
    # readOnly unset is false on Kubernetes (ToolHive's default).
    assert mounts == [
        {"name": "host-data", "mountPath": "/data", "readOnly": True},
        {"name": "host-out", "mountPath": "/out", "readOnly": False},
    ]


def test_volumes_of_an_image_go_on_the_server_container_not_the_proxy() -> None:
    spec = {"image": "ghcr.io/example/server:1", **VOLUMES}
    pod = _pod(_render(spec))
    by_name = {c["name"]: c for c in pod["containers"]}
    assert len(by_name) == 2
    server = next(c for c in pod["containers"] if c.get("stdin"))
    proxy = next(c for c in pod["containers"] if not c.get("stdin"))
    assert {m["mountPath"] for m in server["volumeMounts"] if m["name"].startswith("host-")} == {
        "/data",
        "/out",
    }
    assert not any(m["name"].startswith("host-") for m in proxy.get("volumeMounts", []))


def test_volumes_reach_the_local_server_container() -> None:
    plan = _plan(VOLUMES, "local")
    assert not plan.problems
    (container,) = plan.containers
    assert [(v.host_path, v.mount_path, v.local_read_only()) for v in container.host_volumes] == [
        ("/srv/data", "/data", True),
        ("/srv/out", "/out", True),  # locally read-only unless readOnly: false is written
    ]
