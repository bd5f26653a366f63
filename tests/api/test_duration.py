"""One Duration: what the CRD pattern accepts is exactly what the models and the services accept.

Regression: `syncPolicy.interval: "2000000us"` passed the CRD pattern, then the registry server
refused the rendered config, so the error surfaced only as a status problem after apply.
"""

from __future__ import annotations

import re

import pytest
import yaml

from mcpfleet.api.crdgen import render_crds
from mcpfleet.api.duration import parse_duration
from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.reconcile.mcpregistry import render_config
from mcpfleet.reconcile.model import World
from mcpfleet.registry.config import ConfigError, parse_config
from mcpfleet.vmcp.config import ConfigError as VMCPConfigError
from mcpfleet.vmcp.config import parse_config as parse_vmcp_config

SAMPLES = [
    "30s",
    "1h30m",
    "250ms",
    "2000000us",
    "1.5h",
    "10µs",
    "3ns",
    "5 minutes",
    "90",
    "",
    "1d",
    "-1s",
    "s",
]


def _interval_schema() -> dict[str, object]:
    crd = yaml.safe_load(render_crds()["mcpregistries.mcpfleet.dev.yaml"])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    source = spec["properties"]["registries"]["items"]
    return dict(source["properties"]["syncPolicy"]["properties"]["interval"])


def _service_accepts(value: str) -> bool:
    try:
        parse_config(
            {
                "registryName": "r",
                "sources": [{"name": "a", "file": {"path": "x"}}],
                "deletedRetention": value,
            }
        )
    except ConfigError:
        return False
    return True


def _gateway_accepts(value: str) -> bool:
    try:
        parse_vmcp_config({"operational": {"timeouts": {"default": value}}})
    except VMCPConfigError:
        return False
    return True


@pytest.mark.parametrize("value", SAMPLES)
def test_crd_pattern_models_and_services_agree(value: str) -> None:
    pattern = str(_interval_schema()["pattern"])
    crd_accepts = re.fullmatch(pattern, value) is not None
    try:
        parse_duration(value)
        parsed = True
    except ValueError:
        parsed = False
    assert crd_accepts == parsed == _service_accepts(value) == _gateway_accepts(value), value


def test_microsecond_interval_reaches_a_config_the_registry_server_accepts() -> None:
    registry = parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPRegistry",
            "metadata": {"name": "r"},
            "spec": {
                "registries": [{"name": "a", "kubernetes": {}, "syncPolicy": {"interval": "2000000us"}}]
            },
        }
    )
    assert isinstance(registry, MCPRegistry)
    for platform in ("kubernetes", "local"):
        config = parse_config(render_config(registry, World(platform=platform, namespace="default")).dump())
        assert config.sources[0].sync_policy.seconds == pytest.approx(2.0)


def test_interval_minimum_is_a_cel_rule_too() -> None:
    interval = _interval_schema()
    assert interval["maxLength"] == 64
    crd = yaml.safe_load(render_crds()["mcpregistries.mcpfleet.dev.yaml"])
    text = yaml.safe_dump(crd)
    assert "duration(self.interval) >= duration('100ms')" in text
