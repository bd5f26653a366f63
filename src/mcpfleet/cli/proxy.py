"""`mcpfleet proxy`: serve a stdio MCP server (or a remote one) over streamable HTTP / SSE.

The proxy's configuration is one typed document, `ProxyConfig` (`proxy/config.py`): `--config FILE`
reads it (what the reconcile rules render), and the flags are a thin layer that builds the same model
for hand use. Precedence: the file's fields, then each flag given on the command line replaces its
field (a list flag replaces the whole list; a limit flag replaces that one limit), then the command
after `--` replaces `command`. A flag not given leaves the file's field (or the model's default).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from mcpfleet.cli import limit_options
from mcpfleet.cli.options import Opt

if TYPE_CHECKING:
    from mcpfleet.proxy.config import ProxyConfig, ProxyConfigError

CONFIG = Opt(
    None,
    "--config",
    help="The proxy's config file (JSON or YAML, docs/proxy.md); flags given as well replace its fields.",
)
TRANSPORT = Opt(
    None, "--transport", help="streamable-http (/mcp, the default) or sse (/sse + /messages/, plus /mcp)."
)
HOST = Opt(None, "--host", help="Address to listen on (default 127.0.0.1).")
PORT = Opt(None, "--port", help="Port to listen on (default 8080; 0 = any free port, the URL is printed).")
REMOTE = Opt(None, "--remote", help="Forward to this remote MCP URL instead of a command.")
REMOTE_FROM_ENV = Opt(
    None,
    "--remote-from-env",
    help="ENV_VAR: like --remote, the URL read from this environment variable (a URL with "
    "credentials stays out of the process list).",
)
HEADER_FROM_ENV = Opt(
    [],
    "--header-from-env",
    help="HEADER=ENV_VAR: add a header to remote requests, value from the environment.",
)
BEARER_TOKEN_FROM_ENV = Opt(
    None,
    "--bearer-token-from-env",
    help="ENV_VAR: send `Authorization: Bearer $ENV_VAR` to the remote (--remote only).",
)
ATTACH = Opt(
    None,
    "--attach",
    help="NAMESPACE/POD or NAMESPACE/POD/CONTAINER: use a container's stdio via the Kubernetes attach API.",
)
KUBECONFIG = Opt(None, "--kubeconfig", help="Kubeconfig for --attach (default: the pod's service account).")
CONTEXT = Opt(None, "--context", help="Kubeconfig context for --attach.")
ISOLATION = Opt(
    None,
    "--isolation",
    help="shared (the default): one server process for all handshake-era sessions; session: one per session.",
)
MAX_SESSION_SERVERS = Opt(
    None,
    "--max-session-servers",
    help="--isolation session: most per-session server processes running at once (default 10); a new "
    "session beyond it answers HTTP 503 (a session's process ends with it, idle ones included).",
)
MODERN_ERA = Opt(
    None,
    "--modern-era",
    help="auto (the default): probe the server at start; one process, 2026-07-28 clients translated onto "
    "it, unless it speaks 2026-07-28 and announces list changes (then served natively, handshake "
    "clients by a second process); translate: always one process; separate: always a second one.",
)
ALLOWED_HOST = Opt(
    [], "--allowed-host", help="Extra Host header value accepted by DNS-rebinding protection (host:port)."
)
FORWARD_ALL_PATHS = Opt(
    False,
    "--forward-all-paths",
    help="--remote: forward every path (not only /mcp) to the same path on the remote's origin.",
)
AUTH_CONFIG = Opt(
    None,
    "--auth-config",
    help="Incoming auth (JSON: {type: oidc, oidc: {...}, oidcFile: ...}); every path but /health needs a token.",
)
RUN_CONFIG = Opt(
    None,
    "--run-config",
    help="The server's runconfig.json: its toolConfig (MCPToolConfig filter / overrides) and rateLimiting are enforced.",
)
AUTHZ_CONFIG = Opt(
    None,
    "--authz-config",
    help="Cedar authorization (ToolHive's authz file: {version, type: cedarv1, cedar: {policies, "
    "entities_json}}); followed for changes.",
)
AUDIT_CONFIG = Opt(
    None,
    "--audit-config",
    help="Audit logging settings (JSON: {enabled, logFile, includeRequestData, ...}): one JSON line per request.",
)
WEBHOOK_CONFIG = Opt(
    None,
    "--webhook-config",
    help="Mutating and validating webhooks called on each request (JSON: {mutating, validating, ...}, "
    "rendered from an MCPWebhookConfig).",
)
AUTHSERVER_CONFIG = Opt(
    None,
    "--authserver-config",
    help="Run the embedded OAuth 2.1 authorization server (JSON rendered from an MCPExternalAuthConfig "
    "embeddedAuthServer); every path but /health and its endpoints then needs a token it issued.",
)
PUBLIC_URL = Opt(None, "--public-url", help="External base URL, for the OAuth protected-resource metadata.")
LOG_LEVEL = Opt(None, "--log-level", help="debug, info, warning (the default) or error.")

# Flag -> the ProxyConfig field (wire name) it sets: what an error's field is reported as.
FIELD_FLAGS: dict[str, str] = {
    "transport": "--transport",
    "host": "--host",
    "port": "--port",
    "command": "COMMAND",
    "remote": "--remote",
    "remoteFromEnv": "--remote-from-env",
    "headersFromEnv": "--header-from-env",
    "bearerTokenFromEnv": "--bearer-token-from-env",
    "forwardAllPaths": "--forward-all-paths",
    "attach": "--attach",
    "kubeconfig": "--kubeconfig",
    "context": "--context",
    "isolation": "--isolation",
    "maxSessionServers": "--max-session-servers",
    "modernEra": "--modern-era",
    "allowedHosts": "--allowed-host",
    "authConfig": "--auth-config",
    "runConfig": "--run-config",
    "authzConfig": "--authz-config",
    "auditConfig": "--audit-config",
    "webhookConfig": "--webhook-config",
    "authserverConfig": "--authserver-config",
    "publicUrl": "--public-url",
    "logLevel": "--log-level",
    "limits": "--max-body-bytes / --body-timeout / ...",
}
_LIMIT_FIELDS = (
    "maxBodyBytes",
    "bodyTimeout",
    "headerTimeout",
    "maxHeaderBytes",
    "keepAliveTimeout",
    "maxJsonDepth",
)


def _bad(message: str, param_hint: str | None = None) -> Exception:
    """A usage error, as typer reports it (typer is loaded only then: the start path never needs it)."""
    import typer

    return typer.BadParameter(message, param_hint=param_hint)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise _bad(f"expected NAME=VALUE, got {item!r}", param_hint=flag)
        out[name] = value
    return out


def _attach(value: str) -> dict[str, str]:
    """`NAMESPACE/POD[/CONTAINER]` as the config's `attach`."""
    parts = value.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise _bad(f"expected NAMESPACE/POD[/CONTAINER], got {value!r}", param_hint="--attach")
    return dict(zip(("namespace", "pod", "container"), parts, strict=False))


def overrides_from_flags(command: list[str], flags: dict[str, Any]) -> dict[str, Any]:
    """The fields the given flags set (wire names); a flag not given (None, [] or False) sets nothing."""
    values = {
        "transport": flags["transport"],
        "host": flags["host"],
        "port": flags["port"],
        "command": command or None,
        "remote": flags["remote"],
        "remoteFromEnv": flags["remote_from_env"],
        "headersFromEnv": _pairs(flags["header_from_env"], "--header-from-env") or None,
        "bearerTokenFromEnv": flags["bearer_token_from_env"],
        "forwardAllPaths": flags["forward_all_paths"] or None,
        "attach": _attach(flags["attach"]) if flags["attach"] is not None else None,
        "kubeconfig": flags["kubeconfig"],
        "context": flags["context"],
        "isolation": flags["isolation"],
        "maxSessionServers": flags["max_session_servers"],
        "modernEra": flags["modern_era"],
        "allowedHosts": list(flags["allowed_host"]) or None,
        "authConfig": flags["auth_config"],
        "runConfig": flags["run_config"],
        "authzConfig": flags["authz_config"],
        "auditConfig": flags["audit_config"],
        "webhookConfig": flags["webhook_config"],
        "authserverConfig": flags["authserver_config"],
        "publicUrl": flags["public_url"],
        "logLevel": flags["log_level"],
    }
    limits = {
        wire: flags[name]
        for wire, name in zip(
            _LIMIT_FIELDS,
            (
                "max_body_bytes",
                "body_timeout",
                "header_timeout",
                "max_header_bytes",
                "keep_alive_timeout",
                "max_json_depth",
            ),
            strict=True,
        )
        if flags[name] is not None
    }
    out = {key: value for key, value in values.items() if value is not None}
    if limits:
        out["limits"] = limits
    return out


def config_from(command: list[str], config: str | None, flags: dict[str, Any]) -> ProxyConfig:
    """The ProxyConfig of a command line: `--config`'s file with the flags given over it (see the
    module docstring), or the flags alone. A usage error names the flag, or `--config` and the field."""
    from mcpfleet.proxy.config import ProxyConfigError, parse_proxy_config, read_proxy_config

    overrides = overrides_from_flags(command, flags)
    try:
        raw = read_proxy_config(config) if config is not None else {}
        if "limits" in overrides and isinstance(raw.get("limits"), dict):
            overrides["limits"] = {**raw["limits"], **overrides["limits"]}
        return parse_proxy_config({**raw, **overrides}, config or "options")
    except ProxyConfigError as exc:
        raise _usage(exc, config, overrides) from None


def _flag_of(field: str, message: str) -> str:
    """The flag that sets `field`; for `limits`, the one limit the message names (`limits.maxJsonDepth`
    is --max-json-depth, the limit flags being the kebab-case of their field)."""
    if field == "limits":
        for name in _LIMIT_FIELDS:
            if f"limits.{name}" in message:
                return "--" + re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()
    return FIELD_FLAGS.get(field, field)


def _usage(exc: ProxyConfigError, config: str | None, given: dict[str, Any]) -> Exception:
    """A ProxyConfigError as a usage error: the hint is the flag when one set the field, else --config."""
    field = exc.field
    if field is not None and (config is None or field in given):
        return _bad(str(exc).removeprefix("options: "), param_hint=_flag_of(field, str(exc)))
    return _bad(str(exc), param_hint="--config" if config is not None else None)


def proxy(
    command: list[str],
    config: str | None = CONFIG,
    transport: str | None = TRANSPORT,
    host: str | None = HOST,
    port: int | None = PORT,
    remote: str | None = REMOTE,
    remote_from_env: str | None = REMOTE_FROM_ENV,
    header_from_env: list[str] = HEADER_FROM_ENV,
    bearer_token_from_env: str | None = BEARER_TOKEN_FROM_ENV,
    attach: str | None = ATTACH,
    kubeconfig: str | None = KUBECONFIG,
    context: str | None = CONTEXT,
    isolation: str | None = ISOLATION,
    max_session_servers: int | None = MAX_SESSION_SERVERS,
    modern_era: str | None = MODERN_ERA,
    allowed_host: list[str] = ALLOWED_HOST,
    forward_all_paths: bool = FORWARD_ALL_PATHS,
    auth_config: str | None = AUTH_CONFIG,
    run_config: str | None = RUN_CONFIG,
    authz_config: str | None = AUTHZ_CONFIG,
    audit_config: str | None = AUDIT_CONFIG,
    webhook_config: str | None = WEBHOOK_CONFIG,
    authserver_config: str | None = AUTHSERVER_CONFIG,
    public_url: str | None = PUBLIC_URL,
    log_level: str | None = LOG_LEVEL,
    max_body_bytes: int | None = limit_options.MAX_BODY_BYTES,
    body_timeout: float | None = limit_options.BODY_TIMEOUT,
    header_timeout: float | None = limit_options.HEADER_TIMEOUT,
    max_header_bytes: int | None = limit_options.MAX_HEADER_BYTES,
    keep_alive_timeout: int | None = limit_options.KEEP_ALIVE_TIMEOUT,
    max_json_depth: int | None = limit_options.MAX_JSON_DEPTH,
) -> None:
    """Serve a stdio MCP server over HTTP: COMMAND ARGS... after `--`, a container (--attach), or --remote URL.

    Examples:

    \b
      mcpfleet proxy --port 8080 -- uvx mcp-server-time
      mcpfleet proxy --port 8081 --remote https://example.com/mcp
      REMOTE_URL='https://user:pw@example.com/mcp' mcpfleet proxy --remote-from-env REMOTE_URL
      mcpfleet proxy --config proxy.json --port 8082
    """
    flags = dict(locals())  # every option, first thing: the config takes them by name
    del flags["command"], flags["config"]
    from mcpfleet.proxy.assemble import build_proxy
    from mcpfleet.proxy.config import ProxyConfigError
    from mcpfleet.proxy.serve import run

    settings = config_from(command, config, flags)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        served, limits = build_proxy(settings)
    except ProxyConfigError as exc:
        raise _usage(exc, config, overrides_from_flags(command, flags)) from None
    try:
        run(served, settings.host, settings.port, settings.log_level, limits)
    except KeyboardInterrupt:
        pass
