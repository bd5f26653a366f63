"""MCPRegistry configYAML on Kubernetes: ToolHive's six v1beta1 examples applied to the dev cluster
(`kubectl apply --validate=strict`, their ConfigMaps and Secrets too), read back, planned and rendered;
the rendered children are accepted by the API server (server-side dry run) and hold what each example
asks for: the translated registry config, the user's volumes and mounts, pgpass plumbing, RBAC.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.operator.store import parse
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import mcpregistry
from mcpfleet.reconcile.model import World
from mcpfleet.reconcile.registryconfig import PGPASS_DIR
from tests.reference import TOOLHIVE_EXAMPLES_V1BETA1

EXAMPLES = TOOLHIVE_EXAMPLES_V1BETA1 / "mcp-registries"
NAMES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def _ported(name: str, namespace: str, examples: Path = EXAMPLES) -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all((examples / name).read_text()) if d]
    for document in documents:
        document["apiVersion"] = document["apiVersion"].replace("toolhive.stacklok.dev", "mcpfleet.dev")
        document["metadata"]["namespace"] = namespace
    return documents


def _objects(registry: MCPRegistry, uid: str) -> dict[tuple[str, str], dict[str, Any]]:
    world = World(platform="kubernetes", namespace=registry.namespace)
    plan = mcpregistry.plan(registry, world)
    assert plan.problems == (), plan.problems
    manifests = render(plan, Owner("MCPRegistry", registry.name, registry.namespace, uid), world.images)
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def apply_and_render(
    dev_cluster: ClusterHandle, namespace: str, documents: list[dict[str, Any]], version: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """Apply the ported documents strictly, read the MCPRegistry back at `version` (its spec
    unchanged), plan and render it as the operator would; the children must pass a server-side
    dry run."""
    dev_cluster.kubectl(
        "apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump_all(documents)
    )
    (source,) = [d for d in documents if d["kind"] == "MCPRegistry"]
    name = source["metadata"]["name"]
    stored = json.loads(
        dev_cluster.kubectl(
            "get", "-n", namespace, f"mcpregistries.{version}.mcpfleet.dev/{name}", "-o", "json"
        ).stdout
    )
    assert stored["spec"] == source["spec"], f"{name}: the API server changed the spec"
    entry = parse(stored)  # what the operator holds
    assert entry.error is None and isinstance(entry.model, MCPRegistry), entry.error
    objects = _objects(entry.model, stored["metadata"]["uid"])
    # Every child is a valid Kubernetes object for the API server.
    dev_cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        input=yaml.safe_dump_all(list(objects.values())),
    )
    return objects


def _config(objects: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    (config_map,) = [m for (kind, _), m in objects.items() if kind == "ConfigMap"]
    loaded: dict[str, Any] = yaml.safe_load(config_map["data"]["registry.yaml"])
    return loaded


def test_toolhive_examples_apply_strictly_and_render(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    assert len(NAMES) == 6, NAMES
    rendered: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for name in NAMES:
        documents = _ported(name, namespace)
        objects = apply_and_render(dev_cluster, namespace, documents, "v1beta1")
        # No secret value is rendered anywhere but in the user's own Secret.
        text = json.dumps(list(objects.values()))
        for secret in (d for d in documents if d["kind"] == "Secret"):
            for value in secret.get("stringData", {}).values():
                for line in value.splitlines():
                    assert line.rsplit(":", 1)[-1] not in text, f"{name}: a secret value was rendered"
        rendered[name] = objects

    def deployment(name: str) -> dict[str, Any]:
        (found,) = [m for (kind, _), m in rendered[name].items() if kind == "Deployment"]
        pod: dict[str, Any] = found["spec"]["template"]["spec"]
        return pod

    def registry_container(name: str) -> dict[str, Any]:
        (container,) = [c for c in deployment(name)["containers"] if c["name"] == "registry"]
        return container

    # api: an upstream API source, served under ToolHive's registry name too; PostgreSQL from the config.
    api = _config(rendered["mcpregistry-configyaml-api.yaml"])
    assert api["sources"] == [
        {
            "name": "upstream",
            "format": "upstream",
            "api": {
                "endpoint": "http://upstream-registry.default.svc.cluster.local:8080",
                "pageSize": 100,
                "timeout": "30s",
                "headers": {},
            },
            "syncPolicy": {"interval": "30m"},
            "filter": {"names": {"include": [], "exclude": []}, "tags": {"include": [], "exclude": []}},
        }
    ]
    assert api["aliases"] == ["default"] and "auth" not in api
    assert api["database"]["url"] == "postgresql+asyncpg://db_app@postgres:5432/registry?ssl=prefer"

    # configmap: the file path kept, the ConfigMap volume and its mount appended to the pod.
    configmap = _config(rendered["mcpregistry-configyaml-configmap.yaml"])
    assert configmap["sources"][0]["file"] == {"path": "/config/registry/production/registry.json"}
    assert configmap["sources"][0]["filter"]["tags"] == {
        "include": ["production"],
        "exclude": ["experimental"],
    }
    volumes = {v["name"]: v for v in deployment("mcpregistry-configyaml-configmap.yaml")["volumes"]}
    assert volumes["registry-data-production"]["configMap"]["name"] == "prod-registry"
    assert {"config"} <= set(volumes), "mcpfleet's own volumes are kept"
    mounts = {
        m["name"]: m for m in registry_container("mcpregistry-configyaml-configmap.yaml")["volumeMounts"]
    }
    assert mounts["registry-data-production"] == {
        "name": "registry-data-production",
        "mountPath": "/config/registry/production",
        "readOnly": True,
    }

    # git-auth: the password file is the mounted Secret key; no git password in the config.
    git = _config(rendered["mcpregistry-configyaml-git-auth.yaml"])
    assert git["sources"][0]["git"]["auth"] == {
        "username": "git",
        "passwordFile": "/secrets/git-credentials/token",
    }
    assert {v["name"] for v in deployment("mcpregistry-configyaml-git-auth.yaml")["volumes"]} >= {
        "git-auth-credentials"
    }

    # minimal: the kubernetes source watches the registry's namespace, with least-privilege RBAC.
    minimal = rendered["mcpregistry-configyaml-minimal.yaml"]
    assert _config(minimal)["sources"][0]["kubernetes"] == {"namespaces": [namespace]}
    (role,) = [m for (kind, _), m in minimal.items() if kind == "Role"]
    assert any(
        "mcpservers" in rule["resources"] and rule["verbs"] == ["get", "list", "watch"]
        for rule in role["rules"]
    )

    # oauth: reader authentication by the provider; its CA and client secret are the mounted files.
    oauth = _config(rendered["mcpregistry-configyaml-oauth.yaml"])
    oidc = oauth["auth"]["oidc"]
    assert oauth["auth"]["type"] == "oidc"
    assert oidc["issuer"] == "https://keycloak.example.com/realms/mcp" and oidc["audience"] == "mcp-registry"
    assert oidc["jwksCaFile"] == "/config/certs/keycloak-ca/ca.crt"
    assert oidc["clientSecretFile"] == "/secrets/oauth-client-secret/secret"
    assert oidc["resource"] == "https://registry.example.com"
    assert oidc["scopes"] == ["mcp-registry:read", "mcp-registry:write"]

    # pgpass: an init container copies the Secret key to an emptyDir as mode 0600; PGPASSFILE names it.
    pgpass = _config(rendered["mcpregistry-configyaml-pgpass.yaml"])
    assert pgpass["database"] == {
        "url": "postgresql+asyncpg://db_app@postgres:5432/registry?ssl=require",
        "migrationUser": "db_migrator",
        "poolSize": 5,
        "maxOverflow": 15,
    }
    pod = deployment("mcpregistry-configyaml-pgpass.yaml")
    (init,) = pod["initContainers"]
    assert init["image"] == registry_container("mcpregistry-configyaml-pgpass.yaml")["image"]
    assert "chmod 0600" in init["command"][-1] and f"{PGPASS_DIR}/.pgpass" in init["command"][-1]
    env = {e["name"]: e.get("value") for e in registry_container("mcpregistry-configyaml-pgpass.yaml")["env"]}
    assert env["PGPASSFILE"] == f"{PGPASS_DIR}/.pgpass"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pgpass"] == {"name": "pgpass", "emptyDir": {}}
    projected = volumes["secrets"]["projected"]["sources"]
    assert {
        "secret": {"name": "my-registry-pgpass", "items": [{"key": ".pgpass", "path": "pgpass"}]}
    } in projected
    assert "data" not in volumes, "the database is PostgreSQL: no SQLite scratch volume"


def test_bad_configyaml_is_refused_naming_the_key(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    """The API server cannot parse YAML in CEL: it stores the string, and the operator refuses the
    object (InvalidSpec) naming the key inside configYAML, as `mcpfleet up` does at load."""
    document = _ported("mcpregistry-configyaml-git-auth.yaml", namespace)[-1]
    config = yaml.safe_load(document["spec"]["configYAML"])
    config["sources"][0]["git"]["repository"] = "ftp://example.com/repo"
    config["database"]["password"] = "hunter2"
    document["spec"]["configYAML"] = yaml.safe_dump(config)
    dev_cluster.kubectl(
        "apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump(document)
    )
    stored = json.loads(
        dev_cluster.kubectl(
            "get", "-n", namespace, "mcpregistries.v1beta1.mcpfleet.dev/git-auth-configyaml", "-o", "json"
        ).stdout
    )
    entry = parse(stored)
    assert entry.model is None and entry.error is not None
    assert "spec.configYAML" in entry.error and "sources[0].git.repository" in entry.error, entry.error
    assert "database.password" in entry.error and "hunter2" not in entry.error, entry.error
    # Too large for the CRD itself (maxLength): refused by the API server, field named.
    huge = {**document, "metadata": {**document["metadata"], "name": "huge"}}
    huge["spec"] = {**document["spec"], "configYAML": "# " + "x" * (64 * 1024)}
    result = dev_cluster.kubectl(
        "apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump(huge), check=False
    )
    assert result.returncode != 0 and "spec.configYAML" in result.stderr, result.stderr


def test_paths_under_no_mount_are_a_problem_on_kubernetes_and_files_locally() -> None:
    (registry,) = [
        d for d in _ported("mcpregistry-configyaml-oauth.yaml", "team") if d["kind"] == "MCPRegistry"
    ]
    registry["spec"]["volumeMounts"] = registry["spec"]["volumeMounts"][:1]  # the secret and CA unmounted
    model = parse_manifest(registry)
    assert isinstance(model, MCPRegistry)
    problems = mcpregistry.plan(model, World(platform="kubernetes", namespace="team")).problems
    assert any("auth.oauth.providers[0].clientSecretFile" in p for p in problems), problems
    assert any("auth.oauth.providers[0].caCertPath" in p for p in problems), problems
    local = mcpregistry.plan(model, World(platform="local", namespace="team"))
    assert local.problems == ()
    config = yaml.safe_load(local.config_files[0].content)
    # Mounted: a file of the registry's state folder; not mounted: a path of this machine.
    assert config["sources"][0]["file"]["path"] == "volumes/registry-data-production/registry.json"
    assert config["auth"]["oidc"]["jwksCaFile"] == "/config/certs/keycloak-ca/ca.crt"
    assert {(v.volume, v.config_map, v.secret) for v in local.volume_files} == {
        ("registry-data-production", "prod-registry", None),
        ("oauth-client-secret", None, "oauth-client-secret"),
        ("keycloak-ca", "keycloak-ca", None),
    }


def test_pgpass_locally_is_a_0600_secret_file_named_by_pgpassfile() -> None:
    (registry,) = [
        d for d in _ported("mcpregistry-configyaml-pgpass.yaml", "team") if d["kind"] == "MCPRegistry"
    ]
    model = parse_manifest(registry)
    assert isinstance(model, MCPRegistry)
    plan = mcpregistry.plan(model, World(platform="local", namespace="team"))
    (container,) = plan.containers
    assert ("PGPASSFILE", "secrets/pgpass") in container.env
    assert [(f.filename, f.secret.name, f.secret.key) for f in plan.secret_files] == [
        ("pgpass", "my-registry-pgpass", ".pgpass")
    ]
    assert plan.pod_template is None


@pytest.mark.parametrize("name", NAMES)
def test_both_versions_parse_the_same(name: str) -> None:
    (registry,) = [d for d in _ported(name, "team") if d["kind"] == "MCPRegistry"]
    beta = parse_manifest(registry)
    alpha = parse_manifest({**registry, "apiVersion": "mcpfleet.dev/v1alpha1"})
    assert beta.dump() == alpha.dump()
