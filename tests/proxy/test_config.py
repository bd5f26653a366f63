"""The proxy's configuration file (`proxy/config.py`, `mcpfleet proxy --config`): a new entry point.

Corpus: hostile and broken files, each refused by `mcpfleet proxy --config` as a usage error (exit 2)
naming the field (or the file's problem), never a traceback, never echoing a value a file may carry.
Properties (hypothesis): any JSON document either loads or is refused with a `ProxyConfigError`
(nothing else escapes, the message stays bounded); every valid config survives a round trip through
the file; the flags build the same model as a file with the same fields; flags given over a file
replace its fields (the documented precedence).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mcpfleet.cli import proxy as proxy_cli
from mcpfleet.cli.main import app
from mcpfleet.cli.options import parse
from mcpfleet.proxy.config import (
    MAX_CONFIG_BYTES,
    ProxyConfig,
    ProxyConfigError,
    load_proxy_config,
    parse_proxy_config,
)

SECRET = "hunter2-never-echoed"

# (file content, what the error must name)
CORPUS: list[tuple[bytes, str]] = [
    (b"", "top level"),
    (b"[]", "top level"),
    (b'"just a string"', "top level"),
    (b"{", "neither JSON nor YAML"),
    (b"\xff\xfe\x00garbage", "UTF-8"),
    (b"{}", "give exactly one of: command"),
    (b'{"command": ["x"], "remote": "http://r/mcp"}', "give exactly one of"),
    (b'{"command": "not a list"}', "command"),
    (b'{"command": [1, 2]}', "command.0"),
    (b'{"command": ["x"], "port": 70000}', "port"),
    (b'{"command": ["x"], "port": "eighty"}', "port"),
    (b'{"command": ["x"], "transport": "carrier-pigeon"}', "transport"),
    (b'{"command": ["x"], "isolation": "none"}', "isolation"),
    (b'{"command": ["x"], "maxSessionServers": 0}', "maxSessionServers"),
    (b'{"command": ["x"], "modernEra": "both"}', "modernEra"),
    (b'{"command": ["x"], "logLevel": "loud"}', "logLevel"),
    (b'{"command": ["x"], "limits": {"maxBodyBytes": -1}}', "limits.maxBodyBytes"),
    (b'{"command": ["x"], "limits": {"bogus": 1}}', "limits.bogus"),
    (b'{"command": ["x"], "unknownField": 1}', "unknownField"),
    (b'{"command": ["x"], "headersFromEnv": {"X-A": "A"}}', "headersFromEnv: only used with remote"),
    (b'{"command": ["x"], "forwardAllPaths": true}', "forwardAllPaths"),
    (b'{"remote": "http://r", "remoteFromEnv": "R"}', "remoteFromEnv"),
    (b'{"remoteFromEnv": "NOT-AN-ENV-NAME"}', "remoteFromEnv"),
    (b'{"remoteFromEnv": "R", "headersFromEnv": {"Bad Header": "V"}}', "headersFromEnv"),
    (b'{"remoteFromEnv": "R", "headersFromEnv": {"X-A": "$(rm -rf /)"}}', "headersFromEnv.X-A"),
    (
        b'{"remoteFromEnv": "R", "bearerTokenFromEnv": "T", "headersFromEnv": {"authorization": "A"}}',
        "bearerTokenFromEnv",
    ),
    (b'{"attach": {"namespace": "ns"}}', "give exactly one of pod, podFromEnv"),
    (b'{"attach": {"namespace": "ns", "pod": "p", "podFromEnv": "P"}}', "attach"),
    (b'{"attach": {"namespace": "../../etc", "pod": "p"}}', "attach.namespace"),
    (b'{"command": ["x"], "authConfig": ""}', "authConfig"),
    (b'{"command": ["x"], "allowedHosts": "' + b"h" * 600 + b'"}', "allowedHosts"),
    (json.dumps({"command": ["x"], "allowedHosts": ["h:1"] * 101}).encode(), "allowedHosts"),
    (
        json.dumps({"remoteFromEnv": "R", "headersFromEnv": {f"H{i}": "V" for i in range(101)}}).encode(),
        "headersFromEnv",
    ),
    (b"[" * 100_000 + b"]" * 100_000, "neither JSON nor YAML"),
    (b"command: [x]\nport: !!python/object/apply:os.system ['true']\n", "neither JSON nor YAML"),
    # A YAML alias bomb: shared references, refused by shape without being expanded.
    (
        b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\ncommand: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
        "a",
    ),
    (json.dumps({"command": ["x"], "publicUrl": SECRET * 1000}).encode(), "publicUrl"),
    (b"1: x\nnull: y\ncommand: [a]\n", "Keys should be strings"),
    (b"command: [a]\n? [a, b]\n: z\n", "neither JSON nor YAML"),
    (b'{"command": ["a"], "limits": {"bodyTimeout": 1e400}}', "limits.bodyTimeout"),
    (b" " * (MAX_CONFIG_BYTES + 1), "larger than"),
]


def _write(tmp_path: Path, content: bytes, name: str = "proxy.json") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(("content", "named"), CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_hostile_files_are_refused_naming_the_field(tmp_path: Path, content: bytes, named: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(ProxyConfigError) as caught:
        load_proxy_config(path)
    message = str(caught.value)
    assert named in message and str(path) in message, message
    assert len(message) < 2000 and SECRET not in message


@pytest.mark.parametrize(
    ("content", "named"),
    [CORPUS[5], CORPUS[9], CORPUS[17], CORPUS[20], CORPUS[-1]],
    ids=["no-mode", "port", "unknown", "two-remotes", "huge"],
)
def test_the_command_answers_a_usage_error_never_a_traceback(
    tmp_path: Path, content: bytes, named: str
) -> None:
    path = _write(tmp_path, content)
    result = CliRunner().invoke(app, ["proxy", "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert "--config" in result.output and "Traceback" not in result.output
    assert named.split(":")[0].split(".")[0] in result.output.replace("\n", " "), result.output


def test_a_missing_file_and_a_missing_env_var_name_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = CliRunner().invoke(app, ["proxy", "--config", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2 and "nope.json" in missing.output and "Traceback" not in missing.output
    monkeypatch.delenv("UNSET_URL_VAR", raising=False)
    path = _write(tmp_path, b'{"remoteFromEnv": "UNSET_URL_VAR"}')
    unset = CliRunner().invoke(app, ["proxy", "--config", str(path), "--port", "0"])
    assert unset.exit_code == 2 and "UNSET_URL_VAR" in unset.output and "remoteFromEnv" in unset.output
    # A file the config names, unreadable: named with its field.
    bad = _write(tmp_path, b'{"command": ["true"], "runConfig": "absent.json"}', "other.json")
    result = CliRunner().invoke(app, ["proxy", "--config", str(bad), "--port", "0"])
    assert result.exit_code == 2 and "absent.json" in result.output and "Traceback" not in result.output


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
_FIELDS = sorted(f.alias or n for n, f in ProxyConfig.model_fields.items())
_documents = st.dictionaries(st.sampled_from(_FIELDS) | st.text(max_size=12), _json, max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents)
def test_any_document_loads_or_is_refused_with_a_config_error(document: dict[str, Any]) -> None:
    try:
        config = parse_proxy_config(document)
    except ProxyConfigError as exc:
        assert len(str(exc)) < 4000
        assert exc.field is None or exc.field in _FIELDS
    else:
        assert isinstance(config, ProxyConfig)


_env = st.from_regex(r"[A-Z_][A-Z0-9_]{0,15}", fullmatch=True)
_valid = st.one_of(
    st.fixed_dictionaries(
        {"command": st.lists(st.text(max_size=30), min_size=1, max_size=5)},
        optional={
            "transport": st.sampled_from(["streamable-http", "sse"]),
            "isolation": st.sampled_from(["shared", "session"]),
            "maxSessionServers": st.integers(1, 10000),
            "port": st.integers(0, 65535),
            "runConfig": st.sampled_from(["runconfig.json", "/abs/run.json"]),
        },
    ),
    st.fixed_dictionaries(
        {"remoteFromEnv": _env},
        optional={
            "headersFromEnv": st.dictionaries(
                st.from_regex(r"X-[A-Za-z0-9-]{1,10}", fullmatch=True), _env, max_size=3
            ),
            "bearerTokenFromEnv": _env,
            "forwardAllPaths": st.booleans(),
            "allowedHosts": st.lists(st.from_regex(r"[a-z]{1,8}:[0-9]{2,5}", fullmatch=True), max_size=3),
        },
    ),
)


@settings(max_examples=200, deadline=None)
@given(_valid)
def test_a_valid_config_survives_the_file(document: dict[str, Any]) -> None:
    config = parse_proxy_config(document)
    assert parse_proxy_config(json.loads(json.dumps(config.dump()))) == config


def _from_flags(argv: list[str]) -> ProxyConfig:
    parsed = parse(proxy_cli.proxy, argv, command_line=True)
    assert parsed is not None, argv
    command, params = parsed
    config = params.pop("config")
    result: ProxyConfig = proxy_cli.config_from(command, config, params)
    return result


def test_flags_build_the_same_model_as_the_file(tmp_path: Path) -> None:
    flags = [
        "--transport", "sse", "--host", "0.0.0.0", "--port", "9000", "--isolation", "session",
        "--max-session-servers", "3", "--modern-era", "separate", "--allowed-host", "a:1", "--allowed-host", "b:2",
        "--run-config", "/r.json", "--log-level", "info", "--max-body-bytes", "1000",
        "--", "uvx", "mcp-server-time",
    ]  # fmt: skip
    path = _write(
        tmp_path,
        json.dumps(
            {
                "transport": "sse",
                "host": "0.0.0.0",
                "port": 9000,
                "isolation": "session",
                "maxSessionServers": 3,
                "modernEra": "separate",
                "allowedHosts": ["a:1", "b:2"],
                "runConfig": "/r.json",
                "logLevel": "info",
                "limits": {"maxBodyBytes": 1000},
                "command": ["uvx", "mcp-server-time"],
            }
        ).encode(),
    )
    assert _from_flags(flags) == load_proxy_config(path)
    remote = ["--remote-from-env", "URL", "--header-from-env", "X-A=A", "--bearer-token-from-env", "T"]
    assert _from_flags(remote) == ProxyConfig(
        remote_from_env="URL", headers_from_env={"X-A": "A"}, bearer_token_from_env="T"
    )
    assert (
        _from_flags(["--attach", "ns/pod/c"]).attach
        == ProxyConfig.model_validate({"attach": {"namespace": "ns", "pod": "pod", "container": "c"}}).attach
    )


def test_flags_given_over_a_file_replace_its_fields(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        b'{"port": 1111, "allowedHosts": ["a:1"], "limits": {"maxBodyBytes": 5, "bodyTimeout": 2},'
        b' "runConfig": "run.json", "command": ["file-server"]}',
    )
    config = _from_flags(
        ["--config", str(path), "--port", "2222", "--allowed-host", "b:2", "--max-body-bytes", "7"]
    )
    assert config.port == 2222 and config.allowed_hosts == ["b:2"]  # a list flag replaces the list
    assert config.limits.max_body_bytes == 7 and config.limits.body_timeout == 2  # one limit replaced
    assert config.command == ["file-server"]
    # A relative path in the file is read from the file's folder; a flag's from the working directory.
    assert config.run_config == str(tmp_path / "run.json")
    assert _from_flags(["--config", str(path), "--run-config", "mine.json"]).run_config == "mine.json"
    # The command after `--` replaces the file's.
    assert _from_flags(["--config", str(path), "--", "other"]).command == ["other"]


def test_a_bad_flag_over_a_file_is_reported_as_that_flag(tmp_path: Path) -> None:
    path = _write(tmp_path, b'{"command": ["x"]}')
    result = CliRunner().invoke(app, ["proxy", "--config", str(path), "--isolation", "everything"])
    assert result.exit_code == 2 and "--isolation" in result.output and "Traceback" not in result.output


def test_the_field_reference_is_current() -> None:
    from mcpfleet.proxy.reference import render_reference

    committed = Path(__file__).resolve().parents[2] / "docs" / "reference" / "proxy-config.md"
    assert committed.read_text() == render_reference(), (
        "docs/reference/proxy-config.md is stale: run `mcpfleet crds`"
    )
