"""How the reconcile rules run `mcpfleet proxy` (MCPServer, MCPRemoteProxy): its `ProxyConfig`
(`proxy/config.py`) rendered as one file, `proxy.json`, and the command line that reads it.

The file holds every option but the platform's binding and the stdio server's command: the command
line is `mcpfleet proxy --config {config_dir}/proxy.json --host 0.0.0.0 --port {port}`, then `--`
and the server's command for a stdio server, which the local platform rewrites (it runs the server
in its sandbox or through the container runtime, and listens on 127.0.0.1 and an allocated port).
The file never holds a secret: credentials are environment variables it names, or files.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.proxy.config import CONFIG_FILE
from mcpfleet.reconcile.authserver import AuthServerPlan
from mcpfleet.reconcile.common import canonical_json
from mcpfleet.reconcile.mcpwebhookconfig import WebhookPlan
from mcpfleet.reconcile.model import ConfigFile
from mcpfleet.reconcile.oidc import IncomingAuthPlan, proxy_fields
from mcpfleet.reconcile.policy import PolicyPlan


def command(child: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """`mcpfleet proxy` on its rendered config; `child` (the stdio server's command, possibly empty:
    the platform appends it) after `--`."""
    argv = (
        "mcpfleet",
        "proxy",
        "--config",
        f"{{config_dir}}/{CONFIG_FILE}",
        "--host",
        "0.0.0.0",
        "--port",
        "{port}",
    )
    return argv if child is None else (*argv, "--", *child)


def guard_fields(
    auth: IncomingAuthPlan, embedded: AuthServerPlan, policy: PolicyPlan, webhooks: WebhookPlan
) -> dict[str, Any]:
    """The config's fields naming the documents the proxy enforces (files beside the config)."""
    return {
        **proxy_fields(auth),
        **embedded.proxy_fields(),
        **policy.proxy_fields(),
        **webhooks.proxy_fields(),
    }


def config_file(fields: dict[str, Any]) -> ConfigFile:
    """The rendered `proxy.json`. Not validated here: a spec the proxy would refuse (e.g. a bearer
    token and a forwarded Authorization header) stops the proxy at start with the field named, as
    any hand-written config would, and never fails a reconcile (tests/reconcile read every rendered
    config back as a `ProxyConfig`)."""
    return ConfigFile(CONFIG_FILE, canonical_json(fields))
