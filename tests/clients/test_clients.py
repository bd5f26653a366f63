"""Every listed client, in a temporary HOME: a fresh file, an existing file with other entries (and
comments where the format has them) kept, an invalid file refused and left byte for byte, remove,
idempotence, and `--dry-run` writing nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.clients import setup
from mcpfleet.clients.files import BACKUP_SUFFIX, ConfigFileError
from mcpfleet.clients.jsonc import loads as jsonc_loads
from mcpfleet.clients.table import CLIENTS, Client, Environment, by_id
from mcpfleet.clients.tomlfile import TomlDocument
from mcpfleet.clients.yamlfile import YamlDocument

URL = "http://127.0.0.1:23967/mcp"
NAME = "mcpfleet"

# An existing file per format: another server and other settings, comments where allowed.
EXISTING = {
    "json": '{\n    "theme": "dark",\n    "mcpServers": {\n        "other": {"command": "uvx", "args": ["x"]}\n    }\n}\n',
    "jsonc": (
        '// my settings\n{\n  /* servers */\n  "KEY": {\n    "other": {"url": "http://127.0.0.1:1/mcp"}, // theirs\n'
        '  },\n  "theme": "dark", // trailing comma next\n}\n'
    ),
    "toml": '# my codex config\nmodel = "o3"  # favourite\n\n[mcp_servers.other]\ncommand = "npx"  # theirs\nargs = ["-y", "x"]\n',
    "yaml": "# goose\nGOOSE_MODE: auto  # mode\nextensions:\n  developer:\n    bundled: true\n    enabled: true  # on\n    name: developer\n    type: builtin\n",
}
INVALID = {
    "json": '{"mcpServers": {"other": {}}',
    "jsonc": '{"KEY": {} /* unterminated',
    "toml": "[mcp_servers\nurl = 1\n",
    "yaml": "extensions: [unclosed\n",
}
WRONG_SHAPE = {
    "json": '{"mcpServers": ["a list"]}',
    "jsonc": '{"KEY": ["a list"]}',
    "toml": "mcp_servers = [1, 2]\n",
    "yaml": "extensions:\n- a list\n",
}


def existing_text(client: Client) -> str:
    return EXISTING[client.format].replace("KEY", client.key[0])


def servers(client: Client, text: str) -> dict[str, Any]:
    if client.format == "toml":
        return dict(TomlDocument(text, client.key).servers() or {})
    if client.format == "yaml":
        return dict(YamlDocument(text, client.key).servers() or {})
    value: Any = jsonc_loads(text)
    for key in client.key:
        value = value[key]
    return dict(value)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Environment:
    monkeypatch.setenv("HOME", str(tmp_path))  # never the real home, whatever the code reads
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return Environment(tmp_path, {}, "linux")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.id)
def test_fresh_file(client: Client, env: Environment) -> None:
    assert not setup.found(client, env)
    plan = setup.plan_setup(client, env, NAME, URL, {})
    assert plan.before is None and plan.changed
    assert setup.apply(plan) is None  # nothing to back up
    path = client.file(env)
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
    entry = servers(client, path.read_text())[NAME]
    assert entry == client.entry(NAME, URL, {}) and client.url_of(entry) == URL
    assert setup.status(client, env, NAME).entry_url == URL
    # Its folder exists now (Claude Code's file, ~/.claude.json, is beside its folder ~/.claude).
    assert setup.found(client, env) == (client.folder(env) in client.file(env).parents)


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.id)
def test_existing_file_keeps_other_entries_and_comments(client: Client, env: Environment) -> None:
    path = client.file(env)
    original = existing_text(client)
    _write(path, original)
    os.chmod(path, 0o640)
    before = servers(client, original)
    backup = setup.apply(setup.plan_setup(client, env, NAME, URL, {}))
    assert backup == path.with_name(path.name + BACKUP_SUFFIX) and backup.read_text() == original
    text = path.read_text()
    assert servers(client, text) == {**before, NAME: client.entry(NAME, URL, {})}
    for line in original.splitlines():  # every line of the original is still there
        assert line in text.splitlines(), line
    assert (path.stat().st_mode & 0o777) == 0o640  # mode kept
    # Idempotent: a second setup plans no change and writes nothing.
    again = setup.plan_setup(client, env, NAME, URL, {})
    assert not again.changed and setup.apply(again) is None and path.read_text() == text
    # A new URL replaces our entry only; the backup keeps the file from before mcpfleet.
    setup.apply(setup.plan_setup(client, env, NAME, "http://127.0.0.1:9/mcp", {}))
    assert servers(client, path.read_text())[NAME] == client.entry(NAME, "http://127.0.0.1:9/mcp", {})
    assert backup.read_text() == original
    # Remove takes out only our entry: the file is the original again.
    setup.apply(setup.plan_remove(client, env, NAME))
    assert servers(client, path.read_text()) == before
    if client.format != "yaml":  # ruamel may re-lay out YAML; JSON, JSONC and TOML come back exactly
        assert path.read_text() == original
    else:
        assert all(line in path.read_text().splitlines() for line in original.splitlines())


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.id)
@pytest.mark.parametrize("broken", [INVALID, WRONG_SHAPE], ids=["invalid", "wrong-shape"])
def test_invalid_file_is_refused_and_untouched(
    client: Client, env: Environment, broken: dict[str, str]
) -> None:
    path = client.file(env)
    text = broken[client.format].replace("KEY", client.key[0])
    _write(path, text)
    data = path.read_bytes()
    for plan in (
        lambda: setup.plan_setup(client, env, NAME, URL, {}),
        lambda: setup.plan_remove(client, env, NAME),
    ):
        with pytest.raises(ConfigFileError) as caught:
            plan()
        assert str(path) in str(caught.value) and "left unchanged" in str(caught.value)
    assert path.read_bytes() == data
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()
    assert setup.status(client, env, NAME).error


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.id)
def test_dry_run_plan_writes_nothing_and_hides_header_values(client: Client, env: Environment) -> None:
    headers = {"Authorization": "Bearer sekret-token-123"}
    plan = setup.plan_setup(client, env, NAME, URL, headers)
    diff = plan.diff()
    assert diff.startswith("--- /dev/null") and URL in diff
    assert "sekret-token-123" not in diff and "<redacted>" in diff
    assert not client.file(env).exists() and not client.folder(env).exists()
    setup.apply(plan)
    assert "sekret-token-123" in client.file(env).read_text()  # the client needs it
    removal = setup.plan_remove(client, env, NAME)
    assert "sekret-token-123" not in removal.diff()


HEADER_SHAPES = {
    "claude-code": ("headers", {"Authorization": "Bearer t"}),
    "cursor": ("headers", {"Authorization": "Bearer t"}),
    "vscode": ("headers", {"Authorization": "Bearer t"}),
    "windsurf": ("headers", {"Authorization": "Bearer t"}),
    "cline": ("headers", {"Authorization": "Bearer t"}),
    "goose": ("headers", {"Authorization": "Bearer t"}),
    "zed": ("headers", {"Authorization": "Bearer t"}),
    "codex": ("http_headers", {"Authorization": "Bearer t"}),
    "gemini": ("headers", {"Authorization": "Bearer t"}),
    "claude-desktop": ("env", {"MCPFLEET_HEADER_1": "Bearer t"}),
}


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.id)
def test_headers_go_where_each_client_reads_them(client: Client) -> None:
    key, value = HEADER_SHAPES[client.id]
    entry = client.entry(NAME, URL, {"Authorization": "Bearer t"})
    assert entry[key] == value
    if client.id == "claude-desktop":
        assert entry["args"] == ["-y", "mcp-remote", URL, "--header", "Authorization:${MCPFLEET_HEADER_1}"]


def test_paths_follow_the_platform_and_the_environment(tmp_path: Path) -> None:
    mac = Environment(tmp_path, {}, "darwin")
    support = tmp_path / "Library" / "Application Support"
    assert by_id("claude-desktop").file(mac) == support / "Claude" / "claude_desktop_config.json"
    assert by_id("vscode").file(mac) == support / "Code" / "User" / "mcp.json"
    assert by_id("zed").file(mac) == tmp_path / ".config" / "zed" / "settings.json"
    assert by_id("goose").file(mac) == tmp_path / ".config" / "goose" / "config.yaml"
    linux = Environment(tmp_path, {"XDG_CONFIG_HOME": "/xdg", "CODEX_HOME": "/codex"}, "linux")
    assert by_id("vscode").file(linux) == Path("/xdg/Code/User/mcp.json")
    assert by_id("zed").file(linux) == Path("/xdg/zed/settings.json")
    assert by_id("codex").file(linux) == Path("/codex/config.toml")
    assert by_id("claude-code").file(linux) == tmp_path / ".claude.json"
    relative = Environment(tmp_path, {"XDG_CONFIG_HOME": "rel"}, "linux")  # not absolute: ignored
    assert by_id("goose").file(relative) == tmp_path / ".config" / "goose" / "config.yaml"
    assert by_id("code").id == "vscode" and by_id("Gemini-CLI").id == "gemini"
    with pytest.raises(KeyError, match="known: claude-code"):
        by_id("emacs")


def test_every_client_names_its_documentation() -> None:
    assert len({c.id for c in CLIENTS}) == len(CLIENTS) == 10
    assert all(c.source.startswith("https://") for c in CLIENTS)


def test_fields_the_client_added_to_our_entry_are_kept(env: Environment) -> None:
    client = by_id("cline")
    setup.apply(setup.plan_setup(client, env, NAME, URL, {"Authorization": "Bearer a"}))
    path = client.file(env)
    path.write_text(
        path.read_text().replace('"disabled": false', '"disabled": false, "autoApprove": ["time_x"]')
    )
    assert not setup.plan_setup(client, env, NAME, URL, {"Authorization": "Bearer a"}).changed
    setup.apply(setup.plan_setup(client, env, NAME, "http://127.0.0.1:9/mcp", {}))
    entry = servers(client, path.read_text())[NAME]
    assert entry == {
        "type": "streamableHttp",
        "url": "http://127.0.0.1:9/mcp",
        "disabled": False,
        "autoApprove": ["time_x"],
    }
