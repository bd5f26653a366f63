"""Hostile `spec.configYAML`: every bad document is refused by the manifest validation (what `mcpfleet up`
and the operator run), naming the key inside configYAML, quickly and without echoing credentials."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from mcpfleet.api.kinds import ManifestError, parse_manifest

GOOD: dict[str, Any] = {
    "sources": [{"name": "a", "file": {"path": "/data/registry.json"}}],
    "registries": [{"name": "default", "sources": ["a"]}],
    "auth": {"mode": "anonymous"},
}


def _document(config_yaml: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.dev/v1beta1",
        "kind": "MCPRegistry",
        "metadata": {"name": "r"},
        "spec": {"configYAML": config_yaml, **spec},
    }


def _with(**changes: Any) -> str:
    config = yaml.safe_load(yaml.safe_dump(GOOD))
    for dotted, value in changes.items():
        target = config
        *parents, last = dotted.split("__")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return yaml.safe_dump(config)


def _refusal(config_yaml: str, **spec: Any) -> str:
    started = time.monotonic()
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_document(config_yaml, **spec))
    assert time.monotonic() - started < 2.0, "a hostile configYAML must be refused quickly"
    problems = dict(caught.value.problems)
    assert list(problems) == ["spec.configYAML"], caught.value.problems
    return problems["spec.configYAML"]


BILLION_LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)

CORPUS: list[tuple[str, str, str]] = [
    ("not YAML", "sources: [unclosed", "not valid YAML"),
    ("a list", "- 1\n- 2", "expected one YAML mapping"),
    ("two documents", "a: 1\n---\nb: 2", "expected one YAML mapping"),
    ("deep", "x: " + "[" * 60 + "]" * 60, "nested deeper than 32"),
    ("billion laughs", BILLION_LAUGHS, "YAML nodes"),
    ("wrong types", "sources: 3\nregistries: x\nauth: 1", "sources: Input should be a valid list"),
    (
        "bad repository",
        _with(sources=[{"name": "a", "git": {"repository": "ftp://x"}}]),
        "sources[0].git.repository",
    ),
    (
        "two kinds",
        _with(sources=[{"name": "a", "file": {"path": "/a"}, "api": {"endpoint": "https://x"}}]),
        "sources[0]: set exactly one",
    ),
    ("relative path", _with(sources=[{"name": "a", "file": {"path": "data.json"}}]), "sources[0].file.path"),
    (
        "dot-dot path",
        _with(sources=[{"name": "a", "file": {"path": "/a/../etc/passwd"}}]),
        "sources[0].file.path",
    ),
    (
        "unknown source",
        _with(registries=[{"name": "d", "sources": ["nope"]}]),
        "registries[0].sources[0]: unknown source 'nope'",
    ),
    (
        "two registries",
        _with(registries=[{"name": "d", "sources": ["a"]}, {"name": "e", "sources": ["a"]}]),
        "registries: List should have at most 1 item",
    ),
    (
        "duplicate source",
        _with(sources=[{"name": "a", "file": {"path": "/a"}}, {"name": "a", "file": {"path": "/b"}}]),
        "sources[1].name: duplicate",
    ),
    (
        "bad interval",
        _with(sources=[{"name": "a", "file": {"path": "/a"}, "syncPolicy": {"interval": "soon"}}]),
        "sources[0].syncPolicy.interval",
    ),
    ("unknown key", _with(sourcez=[]), "sourcez: Extra inputs are not permitted"),
    ("managed", _with(sources=[{"name": "a", "managed": {}}]), "sources[0].managed: not supported"),
    ("oauth without settings", _with(auth={"mode": "oauth"}), "auth.oauth: required when mode is oauth"),
    ("bad auth mode", _with(auth={"mode": "open"}), "auth.mode"),
    (
        "http issuer",
        _with(
            auth={
                "mode": "oauth",
                "oauth": {
                    "providers": [{"name": "p", "issuerUrl": "http://idp.example.com", "audience": "a"}]
                },
            }
        ),
        "auth.oauth.providers[0].issuerUrl: 'http://idp.example.com': must use https",
    ),
    (
        "two providers",
        _with(
            auth={
                "mode": "oauth",
                "oauth": {"providers": [{"name": "p", "issuerUrl": "https://a", "audience": "a"}] * 2},
            }
        ),
        "auth.oauth.providers: List should have at most 1 item",
    ),
    ("no auth", _with(auth=None), "auth: Field required"),
    ("telemetry", _with(telemetry={"enabled": True}), "telemetry: not supported"),
    (
        "bad sslMode",
        _with(database={"host": "db", "user": "u", "database": "d", "sslMode": "maybe"}),
        "database.sslMode",
    ),
    (
        "bad port",
        _with(database={"host": "db", "user": "u", "database": "d", "port": "five"}),
        "database.port",
    ),
]

SECRETS: list[tuple[str, str, str]] = [
    (
        "database password",
        _with(database={"host": "db", "user": "u", "database": "d", "password": "s3cr3t-db"}),
        "database.password: inline credentials are refused",
    ),
    (
        "migration password",
        _with(database={"host": "db", "user": "u", "database": "d", "migrationPassword": "s3cr3t-mig"}),
        "database.migrationPassword: inline credentials",
    ),
    (
        "git password",
        _with(
            sources=[
                {
                    "name": "a",
                    "git": {"repository": "https://x", "auth": {"username": "u", "password": "s3cr3t-git"}},
                }
            ]
        ),
        "sources[0].git.auth.password: inline credentials",
    ),
    (
        "api headers",
        _with(
            sources=[
                {
                    "name": "a",
                    "api": {"endpoint": "https://x", "headers": {"Authorization": "Bearer s3cr3t-api"}},
                }
            ]
        ),
        "sources[0].api.headers: inline credentials",
    ),
    (
        "client secret",
        _with(
            auth={
                "mode": "oauth",
                "oauth": {
                    "providers": [
                        {
                            "name": "p",
                            "issuerUrl": "https://a",
                            "audience": "a",
                            "clientSecret": "s3cr3t-oidc",
                        }
                    ]
                },
            }
        ),
        "auth.oauth.providers[0].clientSecret: inline credentials",
    ),
]


@pytest.mark.parametrize(("label", "text", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_configyaml_is_refused_naming_the_key(label: str, text: str, expected: str) -> None:
    assert expected in _refusal(text)


@pytest.mark.parametrize(("label", "text", "expected"), SECRETS, ids=[s[0] for s in SECRETS])
def test_inline_credentials_are_refused_without_echoing_them(label: str, text: str, expected: str) -> None:
    message = _refusal(text)
    assert expected in message and "s3cr3t" not in message, message


def test_huge_configyaml_is_refused_before_parsing() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_document("# " + "x" * (64 * 1024)))
    assert [p for p, _ in caught.value.problems] == ["spec.configYAML"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"registries": [{"name": "a", "url": {"endpoint": "https://x"}}]}, "spec"),
        ({"volumeMounts": [{"name": "missing", "mountPath": "/data"}]}, "spec.volumeMounts"),
        ({"volumes": [{"name": "v", "hostPath": {"path": "/"}}]}, "spec.volumes[0].hostPath"),
        ({"volumes": [{"name": "config", "emptyDir": {}}]}, "spec.volumes[0].name"),
        ({"volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]}, "spec.volumes[0]"),
        (
            {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "volumeMounts": [{"name": "v", "mountPath": "/etc/mcpfleet/config"}],
            },
            "spec.volumeMounts[0].mountPath",
        ),
        (
            {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "volumeMounts": [{"name": "v", "mountPath": "/a/../b"}],
            },
            "spec.volumeMounts[0].mountPath",
        ),
        (
            {
                "volumes": [
                    {"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "../x"}]}}
                ]
            },
            "spec.volumes[0].secret.items[0].path",
        ),
        ({"databaseConfig": {"dbAppUserPasswordSecretRef": {"name": "s", "key": "k"}}}, "spec.configYAML"),
        ({"replicas": 2}, "spec.replicas"),
    ],
)
def test_spec_around_configyaml_is_checked(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_document(yaml.safe_dump(GOOD), **spec))
    assert field in [p for p, _ in caught.value.problems], caught.value.problems


def test_typed_registries_without_configyaml_still_validate() -> None:
    document = _document("x")
    document["spec"] = {"registries": [{"name": "a", "url": {"endpoint": "https://example.com/r.json"}}]}
    parse_manifest(document)
