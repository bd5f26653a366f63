"""`mcpfleet proxy --remote-from-env VAR` (issue 27 item 13): the remote URL, which may hold
credentials, is read from the environment instead of argv. Misuse is a usage error naming the
option and the variable, never the URL; a set variable behaves as `--remote` with that URL."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mcpfleet.cli.main import app
from mcpfleet.proxy.assemble import build_proxy
from mcpfleet.proxy.config import ProxyConfig
from mcpfleet.proxy.remote import RemoteProxyApp


def test_misuse_is_a_usage_error_naming_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_REMOTE_VAR", raising=False)
    runner = CliRunner()
    unset = runner.invoke(app, ["proxy", "--port", "0", "--remote-from-env", "NO_SUCH_REMOTE_VAR"])
    assert unset.exit_code == 2 and "--remote-from-env" in unset.output, unset.output
    assert "NO_SUCH_REMOTE_VAR" in unset.output and "Traceback" not in unset.output
    monkeypatch.setenv("REMOTE_URL_T", "https://u:hunter2@example.com/mcp")
    both = runner.invoke(
        app, ["proxy", "--remote", "https://e.com/mcp", "--remote-from-env", "REMOTE_URL_T", "--port", "0"]
    )
    assert both.exit_code == 2 and "--remote-from-env" in both.output, both.output
    assert "hunter2" not in both.output


def test_the_variable_gives_the_remote_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_URL_T", "https://u:hunter2@example.com/mcp?token=t0k")
    app_, _ = build_proxy(ProxyConfig(remote_from_env="REMOTE_URL_T"))
    relay = app_
    while not isinstance(relay, RemoteProxyApp):
        relay = getattr(relay, "app", None) or getattr(relay, "inner", None)
        assert relay is not None, "no RemoteProxyApp inside the built app"
    assert relay.remote_url == "https://u:hunter2@example.com/mcp?token=t0k"
