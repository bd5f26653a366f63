"""The proxy's webhook file (`--webhook-config`, `webhooks.json`): what `reconcile/mcpwebhookconfig.py`
renders from an MCPWebhookConfig, with every Secret as a file path (never a value).

Relative paths are resolved against the file's own folder (the local platform writes the Secret
files under the config dir). The file is read once at start; one that is missing, not JSON or of
the wrong shape stops the proxy with the field named, as does an `http://` URL without
`insecureSkipVerify` (ToolHive's rule: plain HTTP only when explicitly allowed).
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import Field, ValidationError

from mcpfleet.api.duration import parse_duration
from mcpfleet.api.mcpwebhookconfig import WebhookEndpointBase
from mcpfleet.api.meta import ApiModel
from mcpfleet.configfile import error_location, read_bounded

DEFAULT_TIMEOUT_SECONDS = 10.0
MAX_FILE_BYTES = 1 << 20


class WebhookConfigError(Exception):
    """The webhook file cannot be used; the message names the file and the field."""


class EndpointTLS(ApiModel):
    """TLS toward one webhook: files holding the CA bundle and the client certificate / key (mTLS)."""

    ca_file: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    insecure_skip_verify: bool = False


class Endpoint(WebhookEndpointBase):
    """One webhook as the proxy calls it: the resource's fields, its Secrets as file paths."""

    hmac_secret_file: str | None = None
    tls_config: EndpointTLS | None = None

    @property
    def timeout_seconds(self) -> float:
        seconds = parse_duration(self.timeout) if self.timeout is not None else 0.0
        return seconds or DEFAULT_TIMEOUT_SECONDS

    @property
    def insecure(self) -> bool:
        return self.tls_config is not None and self.tls_config.insecure_skip_verify


class WebhookDocument(ApiModel):
    """`webhooks.json`: the webhooks of one workload and what their payload says about it."""

    server_name: str = ""
    namespace: str | None = None
    transport: str = ""
    config_hash: str | None = None
    mutating: list[Endpoint] = Field(default_factory=list, max_length=20)
    validating: list[Endpoint] = Field(default_factory=list, max_length=20)

    def resolved(self, base: Path) -> WebhookDocument:
        """A copy with every file path made absolute against `base`."""

        def fix(path: str | None) -> str | None:
            return None if path is None else str(base / path)

        def endpoint(e: Endpoint) -> Endpoint:
            tls = e.tls_config
            if tls is not None:
                tls = tls.model_copy(
                    update={
                        "ca_file": fix(tls.ca_file),
                        "client_cert_file": fix(tls.client_cert_file),
                        "client_key_file": fix(tls.client_key_file),
                    }
                )
            return e.model_copy(update={"hmac_secret_file": fix(e.hmac_secret_file), "tls_config": tls})

        return self.model_copy(
            update={
                "mutating": [endpoint(e) for e in self.mutating],
                "validating": [endpoint(e) for e in self.validating],
            }
        )


def url_problems(document: WebhookDocument) -> list[str]:
    """Plain-HTTP URLs without `tlsConfig.insecureSkipVerify`, named by list and index (ToolHive refuses
    them too: a webhook sees every request, so it is reached over TLS unless explicitly allowed)."""
    problems: list[str] = []
    for kind, hooks in (("mutating", document.mutating), ("validating", document.validating)):
        for i, hook in enumerate(hooks):
            if hook.url.startswith("http://") and not hook.insecure:
                problems.append(
                    f"{kind}[{i}].url: {hook.name} uses http://; use https:// or set"
                    " tlsConfig.insecureSkipVerify (development / in-cluster only)"
                )
    return problems


def load_webhook_config(path: str | Path) -> WebhookDocument:
    """Read, validate and resolve a webhook file (raises WebhookConfigError naming the file and field)."""
    file = Path(path)
    raw = read_bounded(file, MAX_FILE_BYTES, "webhook config", WebhookConfigError)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise WebhookConfigError(f"{file}: not JSON: {exc}") from exc
    try:
        document = WebhookDocument.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{error_location(e)}: {e['msg']}" for e in exc.errors())
        raise WebhookConfigError(f"{file}: {problems}") from exc
    refused = url_problems(document)
    if refused:
        raise WebhookConfigError(f"{file}: {'; '.join(refused)}")
    names = [h.name for h in (*document.mutating, *document.validating)]
    if len(names) != len(set(names)):
        raise WebhookConfigError(f"{file}: webhook names must be unique across mutating and validating")
    return document.resolved(file.parent.resolve())
