"""Reconcile rules of MCPWebhookConfig: status (Valid, configHash, referencing workloads) and what a
workload's `webhookConfigRef` renders.

`resolve` gives the webhook lists with the configHash (Secrets only as references). `plan` is what
the MCPServer / MCPRemoteProxy reconcilers use: the proxy's `webhooks.json`
(`mcpfleet.webhook.config.WebhookDocument`: every Secret key — HMAC key, CA bundle, client
certificate and key — as a `SecretFile` path, never a value) and `--webhook-config`. The file is in
the rollout checksum, so an edit of the MCPWebhookConfig rolls the pods (a Secret's new value is read
at the next call: the files are Secret volumes / rewritten locally). A missing object or an
`http://` URL without `tlsConfig.insecureSkipVerify` is a problem naming the field: a workload never
runs without the webhooks it asks for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcpfleet.api.mcpwebhookconfig import WebhookSpec
from mcpfleet.api.meta import LocalObjectReference, SecretKeyRef, WorkloadReference
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import ConfigFile, SecretFile, World, secret_file_path
from mcpfleet.webhook.config import Endpoint, EndpointTLS, WebhookDocument, url_problems

WEBHOOK_CONFIG = "webhooks.json"
"""The proxy's `webhookConfig` file (a ConfigFile)."""


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """MCPServers and MCPRemoteProxies whose `spec.webhookConfigRef` names it."""
    return configkinds.referencing_by_marks("MCPWebhookConfig", name, world)


status = configkinds.status_rule(referencing_workloads)
"""Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`)."""


def resolve(name: str, world: World) -> dict[str, Any] | None:
    """The webhooks of MCPWebhookConfig `name` with its configHash, or None when it does not exist."""
    found = world.webhook_configs.get(name)
    if found is None:
        return None
    return {"name": name, "configHash": config_hash(found), **found.spec.dump()}


config_hash = configkinds.config_hash


@dataclass(frozen=True)
class WebhookPlan:
    """What a workload needs for its webhookConfigRef: the proxy's file, its Secret files, problems."""

    document: WebhookDocument | None = None
    secret_files: tuple[SecretFile, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.document is not None

    def proxy_files(self) -> tuple[ConfigFile, ...]:
        if self.document is None:
            return ()
        content = json.dumps(self.document.dump(), sort_keys=True, indent=2) + "\n"
        return (ConfigFile(WEBHOOK_CONFIG, content),)

    def proxy_fields(self) -> dict[str, str]:
        """The proxy config's field naming the file (`proxy/config.py`), relative to the config's folder."""
        return {} if self.document is None else {"webhookConfig": WEBHOOK_CONFIG}


def _endpoint(hook: WebhookSpec, world: World, files: list[SecretFile]) -> Endpoint:
    def mounted(ref: SecretKeyRef | None, purpose: str) -> str | None:
        if ref is None:
            return None
        filename = f"webhook-{hook.name}-{purpose}"
        files.append(SecretFile(filename, ref))
        return secret_file_path(world.platform, filename)

    tls = None
    if hook.tls_config is not None:
        tls = EndpointTLS(
            ca_file=mounted(hook.tls_config.ca_secret_ref, "ca.crt"),
            client_cert_file=mounted(hook.tls_config.client_cert_secret_ref, "tls.crt"),
            client_key_file=mounted(hook.tls_config.client_key_secret_ref, "tls.key"),
            insecure_skip_verify=hook.tls_config.insecure_skip_verify,
        )
    return Endpoint(
        name=hook.name,
        url=hook.url,
        timeout=hook.timeout,
        failure_policy=hook.failure_policy,
        hmac_secret_file=mounted(hook.hmac_secret_ref, "hmac"),
        tls_config=tls,
    )


def plan(
    ref: LocalObjectReference | None,
    world: World,
    *,
    server_name: str,
    transport: str,
    field: str = "spec.webhookConfigRef",
) -> WebhookPlan:
    """The WebhookPlan of a proxy-fronted workload's `webhookConfigRef`."""
    if ref is None:
        return WebhookPlan()
    found = world.webhook_configs.get(ref.name)
    if found is None:
        return WebhookPlan(problems=(f"{field}: MCPWebhookConfig {ref.name} not found",))
    files: list[SecretFile] = []
    document = WebhookDocument(
        server_name=server_name,
        namespace=world.namespace,
        transport=transport,
        config_hash=config_hash(found),
        mutating=[_endpoint(h, world, files) for h in found.spec.mutating],
        validating=[_endpoint(h, world, files) for h in found.spec.validating],
    )
    problems = tuple(f"{field}: MCPWebhookConfig {ref.name} spec.{p}" for p in url_problems(document))
    if problems:
        return WebhookPlan(problems=problems)
    return WebhookPlan(document=document, secret_files=tuple(files))
