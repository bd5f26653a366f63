"""`mcpfleet add`'s planning: server.json -> manifest, every input honoured or refused by name.

A corpus of hostile or broken entries (each refused naming its field, before anything is written)
and property tests: whatever the values, a planned manifest validates with the models, every
argument is one token without control characters, and no secret value is in the manifest.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.catalogue.entries import CatalogueEntry, bundled, find
from mcpfleet.catalogue.manifest import AddError, Inputs, plan_add

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"


def entry(**overrides: Any) -> CatalogueEntry:
    server: dict[str, Any] = {
        "$schema": SCHEMA,
        "name": "io.example/weather",
        "description": "Weather by city.",
        "version": "1.2.0",
        "packages": [
            {
                "registryType": "pypi",
                "identifier": "weather-mcp",
                "version": "1.2.0",
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {
                        "type": "named",
                        "name": "--units",
                        "choices": ["metric", "imperial"],
                        "default": "metric",
                    },
                    {"type": "named", "name": "--city", "isRequired": True, "valueHint": "city"},
                ],
                "environmentVariables": [
                    {"name": "WEATHER_API_KEY", "isRequired": True, "isSecret": True},
                    {"name": "WEATHER_LOG", "default": "info"},
                ],
            }
        ],
    }
    server.update(overrides)
    return CatalogueEntry(server=server, source="test")


def package(**changes: Any) -> list[dict[str, Any]]:
    base = copy.deepcopy(entry().server["packages"][0])
    base.update(changes)
    return [base]


GOOD = Inputs(env={"WEATHER_API_KEY": "s3cr3t-value"}, args={"city": ["Paris"]})


def test_package_becomes_mcpserver_with_args_env_and_secret_reference() -> None:
    plan = plan_add(entry(), "weather", GOOD, group="tools")
    spec = plan.manifest["spec"]
    assert plan.kind == "MCPServer"
    assert spec["image"] == "uvx://weather-mcp@1.2.0"
    assert spec["args"] == ["--units=metric", "--city=Paris"]
    assert spec["env"] == [{"name": "WEATHER_LOG", "value": "info"}]
    assert spec["secrets"] == [
        {"name": "weather-secrets", "key": "WEATHER_API_KEY", "targetEnvName": "WEATHER_API_KEY"}
    ]
    assert spec["groupRef"] == "tools"
    assert plan.secrets == {"WEATHER_API_KEY": "s3cr3t-value"}
    assert "s3cr3t-value" not in json.dumps(plan.manifest)


def test_npm_package_and_remote() -> None:
    npm = entry(
        packages=package(
            registryType="npm", identifier="@scope/weather", packageArguments=[], environmentVariables=[]
        )
    )
    assert plan_add(npm, "w", Inputs()).manifest["spec"]["image"] == "npx://@scope/weather@1.2.0"
    remote = entry(
        packages=[],
        remotes=[
            {
                "type": "streamable-http",
                "url": "https://{region}.weather.example/mcp",
                "variables": {"region": {"choices": ["eu", "us"], "isRequired": True}},
                "headers": [
                    {"name": "X-Api-Key", "isSecret": True, "isRequired": True},
                    {"name": "X-Plan", "value": "free"},
                ],
            }
        ],
    )
    plan = plan_add(remote, "w", Inputs(args={"region": ["eu"]}, headers={"X-Api-Key": "k-123"}))
    assert plan.kind == "MCPRemoteProxy"
    spec = plan.manifest["spec"]
    assert spec["remoteURL"] == "https://eu.weather.example/mcp"
    assert spec["headerForward"]["addPlaintextHeaders"] == {"X-Plan": "free"}
    assert spec["headerForward"]["addHeadersFromSecret"][0]["valueSecretRef"] == {
        "name": "w-secrets",
        "key": "X-Api-Key",
    }
    assert "k-123" not in json.dumps(plan.manifest)


def test_every_bundled_entry_plans_a_valid_manifest() -> None:
    for item in bundled():
        args = {"directory": ["/tmp"]} if item.short_name == "filesystem" else {}
        plan = plan_add(item, item.short_name, Inputs(args=args))
        assert plan.manifest["spec"]["image"].startswith(("uvx://", "npx://"))


def test_find_by_short_and_full_name_and_version() -> None:
    entries = bundled()
    assert find(entries, "time", None).name == "io.github.modelcontextprotocol/time"
    assert find(entries, "io.github.modelcontextprotocol/time", "2026.10.19").short_name == "time"
    with pytest.raises(LookupError, match="no catalogue entry"):
        find(entries, "time", "0.0.1")
    twin = CatalogueEntry(server={**entries[0].server, "name": "io.other/time"}, source="x")
    with pytest.raises(LookupError, match="ambiguous"):
        find([*entries, twin], "time", None)


# (what is wrong, the entry or inputs, the field the refusal must name)
CORPUS: list[tuple[str, CatalogueEntry, Inputs, str]] = [
    ("required secret missing", entry(), Inputs(args={"city": ["Paris"]}), "environmentVariables[0]"),
    ("required arg missing", entry(), Inputs(env={"WEATHER_API_KEY": "k"}), "packageArguments[1]"),
    (
        "value not a choice",
        entry(),
        Inputs(env={"WEATHER_API_KEY": "k"}, args={"city": ["P"], "units": ["kelvin"]}),
        "packageArguments[0]",
    ),
    (
        "newline in value",
        entry(),
        Inputs(env={"WEATHER_API_KEY": "k\nX=1"}, args={"city": ["P"]}),
        "environmentVariables[0]",
    ),
    (
        "NUL in arg",
        entry(),
        Inputs(env={"WEATHER_API_KEY": "k"}, args={"city": ["P\x00"]}),
        "packageArguments[1]",
    ),
    (
        "unknown input",
        entry(),
        Inputs(env={"WEATHER_API_KEY": "k", "OTHER": "1"}, args={"city": ["P"]}),
        "--env OTHER",
    ),
    (
        "repeated non-repeatable",
        entry(),
        Inputs(env={"WEATHER_API_KEY": "k"}, args={"city": ["P", "Q"]}),
        "--arg city",
    ),
    (
        "option as package name",
        entry(packages=package(identifier="--index-url=http://evil")),
        GOOD,
        "packages[0].identifier",
    ),
    (
        "whitespace in package name",
        entry(packages=package(identifier="weather mcp")),
        GOOD,
        "packages[0].identifier",
    ),
    ("option as version", entry(packages=package(version="-e")), GOOD, "packages[0].version"),
    (
        "runtime arguments",
        entry(packages=package(runtimeArguments=[{"type": "named", "name": "--python", "value": "3.9"}])),
        GOOD,
        "packages[0].runtimeArguments",
    ),
    (
        "private package index",
        entry(packages=package(registryBaseUrl="https://pypi.evil.example")),
        GOOD,
        "packages[0].registryBaseUrl",
    ),
    (
        "unknown registry type",
        entry(packages=package(registryType="nuget")),
        GOOD,
        "packages[0].registryType",
    ),
    (
        "flag that is no flag",
        entry(packages=package(packageArguments=[{"type": "named", "name": "; rm -rf ~"}])),
        GOOD,
        "packageArguments[0].name",
    ),
    (
        "secret argument",
        entry(
            packages=package(
                packageArguments=[{"type": "named", "name": "--token", "isSecret": True, "value": "x"}]
            )
        ),
        GOOD,
        "packageArguments[0]",
    ),
    (
        "positional option",
        entry(
            packages=package(
                packageArguments=[{"type": "positional", "valueHint": "dir", "isRequired": True}]
            )
        ),
        Inputs(env={"WEATHER_API_KEY": "k"}, args={"dir": ["--help"]}),
        "packageArguments[0]",
    ),
    (
        "bad env name",
        entry(packages=package(environmentVariables=[{"name": "A=B"}])),
        Inputs(args={"city": ["P"]}),
        "environmentVariables[0].name",
    ),
    (
        "undefined url variable",
        entry(packages=[], remotes=[{"type": "sse", "url": "https://{host}/sse"}]),
        Inputs(),
        "remotes[0].url",
    ),
    (
        "bad header name",
        entry(
            packages=[],
            remotes=[
                {"type": "sse", "url": "https://a.example/sse", "headers": [{"name": "X Y", "value": "1"}]}
            ],
        ),
        Inputs(),
        "headers[0].name",
    ),
    (
        "image with option",
        entry(packages=package(registryType="oci", identifier="-v/etc:/x")),
        GOOD,
        "packages[0].identifier",
    ),
    ("no way to run", entry(packages=[]), Inputs(), "packages"),
    (
        "http transport without port",
        entry(packages=package(transport={"type": "streamable-http", "url": "http://localhost/mcp"})),
        GOOD,
        "transport.url",
    ),
    (
        "not a number",
        entry(
            packages=package(
                packageArguments=[{"type": "named", "name": "--n", "format": "number", "default": "many"}],
                environmentVariables=[],
            )
        ),
        Inputs(),
        "packageArguments[0]",
    ),
]


@pytest.mark.parametrize(("case", "item", "inputs", "field"), CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_entry_is_refused_naming_the_field(
    case: str, item: CatalogueEntry, inputs: Inputs, field: str
) -> None:
    with pytest.raises(AddError) as caught:
        plan_add(item, "weather", inputs)
    assert field in str(caught.value), case


TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(city=TEXT, key=TEXT, units=TEXT, identifier=TEXT, version=TEXT)
def test_any_values_give_a_clean_manifest_or_a_named_refusal(
    city: str, key: str, units: str, identifier: str, version: str
) -> None:
    item = entry(packages=package(identifier=identifier or "x", version=version or "1"))
    item.server["packages"][0]["packageArguments"][0]["choices"] = None
    inputs = Inputs(env={"WEATHER_API_KEY": key}, args={"city": [city], "units": [units]})
    try:
        plan = plan_add(item, "weather", inputs)
    except AddError as exc:
        assert exc.field
        return
    spec = plan.manifest["spec"]
    assert not spec["image"].removeprefix("uvx://").startswith("-")
    assert all(not any(ord(c) < 32 for c in arg) for arg in spec["args"])
    assert all(arg.startswith(("--units=", "--city=")) for arg in spec["args"])
    assert all(e["name"] != "WEATHER_API_KEY" for e in spec.get("env", []))
    if key:
        assert plan.secrets == {"WEATHER_API_KEY": key}
        assert spec["secrets"][0]["key"] == "WEATHER_API_KEY"
