"""The config model: camelCase wire form, round trip, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mcpfleet.api.duration import parse_duration
from mcpfleet.registry.config import ConfigError, load_config, parse_config

FULL = {
    "registryName": "main",
    "sources": [
        {
            "name": "th",
            "format": "toolhive",
            "file": {"path": "registry.json"},
            "syncPolicy": {"interval": "30s"},
            "filter": {
                "names": {"include": ["*fetch*"], "exclude": []},
                "tags": {"include": [], "exclude": ["deprecated"]},
            },
        },
        {"name": "web", "url": {"url": "https://example.com/registry.json"}},
        {"name": "cm", "configMap": {"namespace": "default", "name": "reg", "key": "registry.json"}},
        {"name": "repo", "git": {"repository": "https://example.com/r.git", "tag": "v1", "path": "r.json"}},
        {"name": "fed", "api": {"url": "https://registry.example.com", "pageSize": 50}},
        {"name": "k8s", "kubernetes": {"namespaces": ["team-a"]}},
    ],
    "database": {"url": "postgresql+asyncpg://reg@db:5432/registry", "passwordFile": "/secrets/pw"},
    "server": {"host": "0.0.0.0", "port": 8080},
}


def test_full_config_round_trips_in_camel_case(tmp_path: Path) -> None:
    cfg = parse_config(FULL)
    assert [s.kind for s in cfg.sources] == ["file", "url", "configMap", "git", "api", "kubernetes"]
    dumped = cfg.dump()
    assert "registryName" in dumped and "syncPolicy" in dumped["sources"][0]
    assert dumped["sources"][2]["configMap"]["key"] == "registry.json"
    assert parse_config(dumped) == cfg
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(dumped))
    assert load_config(path) == cfg


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"sources": [{"name": "a"}]}, "sources[0]"),
        (
            {"sources": [{"name": "a", "file": {"path": "x"}, "syncPolicy": {"interval": "soon"}}]},
            "sources[0].syncPolicy.interval",
        ),
        ({"sources": [{"name": "a", "file": {"path": "x"}, "typo": 1}]}, "sources[0].typo"),
        ({"sources": [{"name": "a", "api": {"url": "ftp://x"}}]}, "sources[0].api.url"),
        ({"sources": [{"name": "a", "kubernetes": {}, "format": "toolhive"}]}, "sources[0]"),
        (
            {"sources": [{"name": "a", "git": {"repository": "r", "path": "p", "branch": "b", "tag": "t"}}]},
            "sources[0].git",
        ),
        ({"database": {"url": "mysql://x"}}, "database.url"),
        ({"registryName": "Bad Name"}, "registryName"),
    ],
)
def test_errors_name_the_key(patch: dict[str, object], key: str) -> None:
    doc = {"registryName": "r", "sources": [{"name": "a", "file": {"path": "x"}}], **patch}
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert f"\n  {key}:" in str(info.value), str(info.value)


def test_duplicate_source_names_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="duplicate source name"):
        parse_config({"registryName": "r", "sources": [{"name": "a", "file": {"path": "x"}}] * 2})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_durations() -> None:
    assert parse_duration("1h30m") == 5400 and parse_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        parse_duration("5 minutes")


def test_database_url_takes_password_from_file(tmp_path: Path) -> None:
    from mcpfleet.registry.store import database_url

    (tmp_path / "pw").write_text("p@ss/word\n")
    url = database_url(
        "postgresql+asyncpg://reg@db:5432/registry?ssl=require", tmp_path / "x.db", str(tmp_path / "pw")
    )
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    assert parsed.password == "p@ss/word" and parsed.username == "reg" and parsed.query == {"ssl": "require"}
    assert database_url(None, tmp_path / "x.db", None) == f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
