"""`mcpfleet console serve`'s Kubernetes options: the choices it refuses naming the option, and the
Host names it answers when given `--allowed-host` (a cluster Service's names) besides loopback."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from mcpfleet.cli.app import app as cli_app
from mcpfleet.console.app import create_app

SERVICE = "mcpfleet-operator-console.mcpfleet-system.svc"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--kubernetes", "--state-dir", "."], "either --state-dir or --kubernetes"),
        (["--namespace", "team-a"], "--namespace goes with --kubernetes"),
    ],
)
def test_conflicting_options_are_refused(args: list[str], said: str) -> None:
    result = CliRunner().invoke(cli_app, ["console", "serve", *args])
    assert result.exit_code == 2
    assert said in " ".join(result.output.split()), result.output


def test_no_kubernetes_configuration_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = CliRunner().invoke(cli_app, ["console", "serve", "--kubernetes"])
    assert result.exit_code == 2
    assert "no Kubernetes configuration" in " ".join(result.output.split()), result.output


@pytest.mark.parametrize(
    ("host", "status"),
    [
        (SERVICE, 200),
        (f"{SERVICE}:80", 200),
        ("localhost:8765", 200),
        ("evil.example", 421),
        (f"{SERVICE}.evil.example", 421),
    ],
)
async def test_the_service_name_is_accepted_as_host(tmp_path: Path, host: str, status: int) -> None:
    app = create_app(tmp_path, extra_hosts=[SERVICE, f"{SERVICE}:*"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
        answer = await client.get("/healthz", headers={"Host": host})
    assert answer.status_code == status
