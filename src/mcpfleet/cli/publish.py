"""`mcpfleet registry publish`: publish a server.json to a registry (POST /v0.1/publish)."""

from __future__ import annotations

from pathlib import Path

import typer


def publish(
    file: Path = typer.Argument(..., help="The server.json document to publish."),
    registry: str = typer.Option(
        ..., "--registry", "-r", envvar="MCPFLEET_REGISTRY_URL", help="Base URL of the registry."
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="File holding the bearer token (else $MCPFLEET_REGISTRY_TOKEN)."
    ),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds to wait for the registry."),
) -> None:
    """Publish a server.json as a new version (POST /v0.1/publish) with an OIDC bearer token.

    The token must carry the registry's publish scope and a grant for the server's namespace. The
    token is read from --token-file or $MCPFLEET_REGISTRY_TOKEN, never from the command line (it
    would show in the process list).

    Examples:

    \b
      MCPFLEET_REGISTRY_TOKEN=$(get-token) mcpfleet registry publish server.json -r https://registry.example.com
    """
    import os

    import httpx
    import orjson

    try:
        body = file.read_bytes()
    except OSError as exc:
        typer.echo(f"cannot read {file}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    try:
        token = (
            token_file.read_text().strip() if token_file else os.environ.get("MCPFLEET_REGISTRY_TOKEN", "")
        )
    except OSError as exc:
        typer.echo(f"cannot read {token_file}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    if not token:
        typer.echo("no token: pass --token-file or set MCPFLEET_REGISTRY_TOKEN", err=True)
        raise typer.Exit(2)
    url = registry.rstrip("/") + "/v0.1/publish"
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        typer.echo(f"cannot reach {url}: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        answer = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        answer = None
    if response.status_code != 200 or not isinstance(answer, dict):
        detail = answer.get("detail") if isinstance(answer, dict) else response.text[:300]
        fields = [e.get("location") for e in answer.get("errors") or []] if isinstance(answer, dict) else []
        where = f" ({', '.join(str(f) for f in fields if f)})" if any(fields) else ""
        typer.echo(f"publish failed: HTTP {response.status_code}: {detail}{where}", err=True)
        raise typer.Exit(1)
    server = answer.get("server", {})
    typer.echo(f"published {server.get('name')} {server.get('version')}")
