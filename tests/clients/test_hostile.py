"""Client files mcpfleet must not clobber (a corpus, each with its clear refusal, the original left
byte for byte), and the command line's own checks (URL, headers, names, clients, no fleet)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpfleet.cli.app import command
from mcpfleet.clients import files, setup
from mcpfleet.clients.files import ConfigFileError
from mcpfleet.clients.table import Environment, by_id

URL = "http://127.0.0.1:23967/mcp"


@pytest.fixture
def env(tmp_path: Path) -> Environment:
    return Environment(tmp_path, {}, "linux")


def test_symlink_is_refused_and_its_target_untouched(env: Environment, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"mcpServers": {}}')
    path = by_id("cursor").file(env)
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    with pytest.raises(ConfigFileError, match="symbolic link"):
        setup.plan_setup(by_id("cursor"), env, "mcpfleet", URL, {})
    assert path.is_symlink() and target.read_text() == '{"mcpServers": {}}'


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (
            lambda p: p.write_bytes(b'{"mcpServers": {}, "pad": "' + b"x" * files.MAX_BYTES + b'"}'),
            "more than",
        ),
        (lambda p: p.write_bytes(b'{"mcpServers": {"a": "\xff\xfe"}}'), "not UTF-8"),
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: p.write_text('{"mcpServers": {"x": 1}} {}'), "after the document"),
        (lambda p: p.write_text('{"mcpServers": {"x": 1} // comment\n}'), "a comment"),
        (lambda p: p.write_text('{"mcpServers": null}'), "`mcpServers` is null"),
        (lambda p: p.write_text("[" * 5000), "nesting deeper"),
    ],
    ids=["huge", "not-utf8", "directory", "fifo", "trailing-text", "comment-in-json", "null-servers", "deep"],
)
def test_corpus_of_files_refused_untouched(env: Environment, make: object, problem: str) -> None:
    client = by_id("cursor")
    path = client.file(env)
    path.parent.mkdir(parents=True)
    make(path)  # type: ignore[operator]
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(ConfigFileError, match=problem) as caught:
        setup.plan_setup(client, env, "mcpfleet", URL, {})
    assert str(path) in str(caught.value)
    if before is not None:
        assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("client", "text", "problem"),
    [
        ("codex", "a = [[[[[[" * 2000, "not valid TOML"),
        ("codex", '[mcp_servers]\nmcpfleet = "a string"\n', None),
        (
            "goose",
            "a: &a [x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\nextensions: [1]\n",
            "`extensions` is a list",
        ),
        ("goose", "- top level list\n", "the document is a list"),
        ("goose", "extensions: {a: 1\n", "not valid YAML"),
        (
            "goose",
            "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nextensions:\n  bomb: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
            "more than 10000 values",
        ),
    ],
)
def test_hostile_toml_and_yaml(env: Environment, client: str, text: str, problem: str | None) -> None:
    row = by_id(client)
    path = row.file(env)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    if problem is None:  # our name holds something that is not an entry: replaced, rest kept
        setup.apply(setup.plan_setup(row, env, "mcpfleet", URL, {}))
        assert 'url = "http://127.0.0.1:23967/mcp"' in path.read_text()
        return
    with pytest.raises(ConfigFileError, match=problem):
        setup.plan_setup(row, env, "mcpfleet", URL, {})
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("client", "text", "kept"),
    [
        ("goose", "# only a comment\n", "# only a comment"),
        ("goose", "extensions:\n# none yet\nGOOSE_MODE: auto\n", "GOOSE_MODE: auto"),
        ("codex", 'mcp_servers = {other = {command = "x"}}\n', 'other = {command = "x"}'),
        ("codex", '[mcp_servers]\nmcpfleet = {url = "old"}  # ours\n', "[mcp_servers]"),
        ("codex", 'mcp_servers.mcpfleet.url = "old"\nmodel = "o3"\n', 'model = "o3"'),
        ("zed", "// only a comment", "// only a comment"),
    ],
)
def test_unusual_layouts_are_edited_in_their_own_style(
    env: Environment, client: str, text: str, kept: str
) -> None:
    row = by_id(client)
    path = row.file(env)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    setup.apply(setup.plan_setup(row, env, "mcpfleet", URL, {"X-Key": "v"}))
    assert kept in path.read_text()
    assert setup.status(row, env, "mcpfleet").entry_url == URL
    assert not setup.plan_setup(row, env, "mcpfleet", URL, {"X-Key": "v"}).changed
    setup.apply(setup.plan_remove(row, env, "mcpfleet"))
    assert kept in path.read_text() and setup.status(row, env, "mcpfleet").entry_url is None


def test_a_file_changed_during_the_edit_is_not_replaced(env: Environment) -> None:
    client = by_id("cursor")
    path = client.file(env)
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {}}')
    plan = setup.plan_setup(client, env, "mcpfleet", URL, {})
    path.write_text('{"mcpServers": {"new": {}}}')
    with pytest.raises(ConfigFileError, match="changed while"):
        setup.apply(plan)
    assert path.read_text() == '{"mcpServers": {"new": {}}}'


# -- the command line ---------------------------------------------------------------------------


def run(tmp_path: Path, *args: str) -> tuple[int, str]:
    environ = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": "",
        "CODEX_HOME": "",
        "MCPFLEET_HOME": str(tmp_path / "fleet"),
    }
    result = CliRunner().invoke(command(), ["client", *args], env=environ)
    return result.exit_code, result.output


def test_cli_refuses_bad_input_before_writing(tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    cases = [
        (["setup", "--url", "file:///etc/passwd"], "expected an http(s) URL"),
        (["setup", "--url", "http://user:pw@127.0.0.1/mcp"], "credentials in a URL"),
        (["setup", "--url", URL, "--header", "Bad Name=x"], "HTTP header name"),
        (["setup", "--url", URL, "--header", "X-A=a\nb"], "on one line"),
        (["setup", "--url", URL, "--token-file", str(tmp_path / "missing")], "cannot be read"),
        (["setup", "--url", URL, "--name", "-rf"], "--name '-rf'"),
        (["setup", "emacs", "--url", URL], "unknown client 'emacs'"),
        (["setup"], "no fleet state in"),
        (["setup", "--server", "time"], "mcpfleet run time"),
    ]
    for args, problem in cases:
        code, output = run(tmp_path, *args)
        assert code == 1 and problem in output, (args, output)
    assert not (tmp_path / ".cursor" / "mcp.json").exists()


def test_cli_setup_list_remove_with_a_token(tmp_path: Path) -> None:
    code, output = run(tmp_path, "setup", "--url", URL)
    assert code == 1 and "no AI client found" in output
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".gemini").mkdir()
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    code, output = run(tmp_path, "setup", "--url", URL, "--token-file", str(token), "--dry-run")
    assert code == 0 and "tok-123" not in output and '"Authorization": "<redacted>"' in output
    assert not (tmp_path / ".cursor" / "mcp.json").exists()
    code, output = run(tmp_path, "setup", "--url", URL, "--token-file", str(token))
    assert (
        code == 0 and "Cursor: wrote" in output and "Gemini CLI: wrote" in output and "tok-123" not in output
    )
    assert "Bearer tok-123" in (tmp_path / ".cursor" / "mcp.json").read_text()
    code, output = run(tmp_path, "setup", "--url", URL, "--token-file", str(token))
    assert code == 0 and output.count("nothing changed") == 2
    code, output = run(tmp_path, "list", "--url", URL)
    assert code == 0 and "cursor          yes    current" in output and "tok-123" not in output
    (tmp_path / ".codeium" / "windsurf").mkdir(parents=True)
    (tmp_path / ".codeium" / "windsurf" / "mcp_config.json").write_text("{broken")
    code, output = run(tmp_path, "setup", "windsurf", "cursor", "--url", URL)
    assert code == 1 and "Windsurf" in output and "left unchanged" in output and "Cursor: wrote" in output
    code, output = run(tmp_path, "remove")
    assert code == 1 and "Cursor: removed" in output and "Gemini CLI: removed" in output  # windsurf: refused
    assert "mcpfleet" not in (tmp_path / ".cursor" / "mcp.json").read_text()


def test_a_folder_that_cannot_be_made_is_a_clear_refusal(env: Environment) -> None:
    client = by_id("cursor")
    plan = setup.plan_setup(client, env, "mcpfleet", URL, {})
    (env.home / ".cursor").write_text("a file where the folder should be")  # appears after the plan
    with pytest.raises(ConfigFileError, match="Not a directory"):
        setup.apply(plan)
    with pytest.raises(ConfigFileError, match="Not a directory"):
        setup.plan_setup(client, env, "mcpfleet", URL, {})
