"""Issue 28: one model of a registry source. The registry server's config file and MCPRegistry's
configYAML (ToolHive's registry-server config) parse sources with the same classes, so a configYAML
source reaches the server's file as written, only its mounted paths moved for the platform."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.registryconfig import ConfigYAMLError, RegistryServerConfig, parse_config_yaml
from mcpfleet.api.registrysource import Source
from mcpfleet.reconcile.registryconfig import plan_config_yaml
from mcpfleet.registry.config import ConfigError, RegistryConfig, parse_config

GIT = {
    "repository": "https://git.example/catalogue.git",
    "branch": "main",
    "path": "data/registry.json",
    "auth": {"username": "reader", "passwordFile": "/mnt/git/token"},
}


def _config_yaml(source: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "sources": [{"name": "a", **source}],
            "registries": [{"name": "default", "sources": ["a"]}],
            "auth": {"mode": "anonymous"},
        }
    )


def _registry(source: dict[str, Any], **spec: Any) -> MCPRegistry:
    document = {
        "apiVersion": "mcpfleet.dev/v1beta1",
        "kind": "MCPRegistry",
        "metadata": {"name": "cat", "namespace": "team"},
        "spec": {"configYAML": _config_yaml(source), **spec},
    }
    registry = parse_manifest(document)
    assert isinstance(registry, MCPRegistry)
    return registry


def test_the_server_config_and_configyaml_share_one_source_class() -> None:
    assert RegistryServerConfig.model_fields["sources"].annotation == list[Source]
    assert RegistryConfig.model_fields["sources"].annotation == list[Source]


def test_a_configyaml_git_source_reaches_the_server_config_as_written_on_kubernetes() -> None:
    mounts = {
        "volumes": [{"name": "git", "secret": {"secretName": "git-token"}}],
        "volumeMounts": [{"name": "git", "mountPath": "/mnt/git"}],
    }
    plan = plan_config_yaml(_registry({"git": GIT}, **mounts), "kubernetes", "registry", None)
    assert plan.problems == [] and plan.config is not None
    (served,) = plan.config.dump()["sources"]
    assert served["git"] == GIT
    # And the server reads its own file back into the same model.
    assert parse_config(plan.config.dump()).sources[0] == plan.config.sources[0]


def test_locally_only_the_mounted_paths_move() -> None:
    mounts = {
        "volumes": [{"name": "git", "secret": {"secretName": "git-token"}}],
        "volumeMounts": [{"name": "git", "mountPath": "/mnt/git"}],
    }
    plan = plan_config_yaml(
        _registry({"git": GIT}, **mounts), "local", "registry", "sqlite+aiosqlite:///x.db"
    )
    assert plan.config is not None
    (served,) = plan.config.dump()["sources"]
    assert served["git"] == {**GIT, "auth": {"username": "reader", "passwordFile": "volumes/git/token"}}


def test_a_kubernetes_source_without_namespaces_watches_the_registry_namespace() -> None:
    plan = plan_config_yaml(_registry({"kubernetes": {}}), "kubernetes", "registry", None)
    assert plan.config is not None and plan.config.sources[0].kubernetes is not None
    assert plan.config.sources[0].kubernetes.namespaces == ["team"]
    assert plan.watches_workloads


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ({"url": {"url": "https://x.example/r.json"}}, "sources[0].url"),
        ({"configMap": {"namespace": "t", "name": "c", "key": "k"}}, "sources[0].configMap"),
        ({"git": {**GIT, "repository": "/srv/repo"}}, "sources[0].git.repository"),
        (
            {"git": {**GIT, "auth": {"username": "u", "passwordFile": "token"}}},
            "sources[0].git.auth.passwordFile",
        ),
        ({"git": {**GIT, "auth": {"username": "u", "password": "hunter2"}}}, "sources[0].git.auth.password"),
        ({"file": {"path": "/data/../etc/passwd"}}, "sources[0].file.path"),
        (
            {"api": {"endpoint": "https://r.example", "headers": {"Authorization": "x"}}},
            "sources[0].api.headers",
        ),
    ],
)
def test_configyaml_holds_the_shared_model_to_toolhive_kinds_urls_and_mounted_files(
    source: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigYAMLError) as caught:
        parse_config_yaml(_config_yaml(source))
    assert str(caught.value).startswith(f"{key}: "), caught.value
    assert "hunter2" not in str(caught.value)


def test_the_server_config_takes_local_paths_and_the_old_url_key_of_an_api_source() -> None:
    config = parse_config(
        {
            "registryName": "r",
            "sources": [
                {"name": "repo", "git": {"repository": "/srv/repo", "path": "r.json"}},
                {"name": "file", "file": {"path": "registry.json"}},
                {"name": "fed", "api": {"url": "https://registry.example", "pageSize": 50}},
            ],
        }
    )
    api = config.sources[2].api
    assert api is not None and api.endpoint == "https://registry.example" and api.page_size == 50
    assert config.dump()["sources"][2]["api"]["endpoint"] == "https://registry.example"
    with pytest.raises(ConfigError, match=r"sources\[0\]\.git\.auth: .*password: inline credentials"):
        parse_config(
            {
                "registryName": "r",
                "sources": [
                    {"name": "a", "git": {"repository": "/r", "auth": {"username": "u", "password": "p"}}}
                ],
            }
        )
