"""The operator's side of the CRD conversion webhook: its TLS identity, the CA bundle in the CRDs, serving.

Every replica serves `mcpfleet.api.conversion` (a standby too: the API server calls whichever pod
the `mcpfleet-conversion` Service picks, and conversions are pure functions). At start the operator:

1. reads the Secret `mcpfleet-conversion-tls` in its namespace, or creates it: a self-signed CA and
   a serving certificate for `mcpfleet-conversion.<namespace>.svc` (two replicas racing both try to
   create it; the loser re-reads the winner's, so every replica serves the same certificate);
2. patches each CRD whose versions differ so `spec.conversion.webhook.clientConfig` names the Service
   with that CA bundle (a merge patch of `caBundle` and the Service namespace, nothing else);
3. serves POST /convert over TLS on `MCPFLEET_CONVERSION_WEBHOOK_PORT` (default off; the shipped
   Deployment sets 9443).

Out of the cluster (`kubectl apply -f deploy/crds`, then `mcpfleet operator run --kubeconfig …`) there
is no Service: `MCPFLEET_CONVERSION_WEBHOOK_URL=https://HOST:PORT` names where the API server reaches
this process instead. The operator then makes a fresh CA and a certificate for HOST (in memory, for
this run), patches the CRDs to call that URL with that CA, and serves on PORT.

No cert-manager: one fewer thing to install, and the CA never leaves the Secret and the CRDs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mcpfleet.api.conversion import (
    CONVERT_PATH,
    SERVICE_NAME,
    SERVICE_PORT,
    ConversionCounts,
    app,
    server_config,
)
from mcpfleet.api.kinds import ALL_KINDS
from mcpfleet.platform.kubernetes.api import ApiError, KubeApi

log = logging.getLogger("mcpfleet.operator.conversion")

SECRET_NAME = "mcpfleet-conversion-tls"
VALIDITY = datetime.timedelta(days=3650)
"""A private CA that only the API server trusts, for a Service name: rotate by deleting the Secret."""


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    names: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=names is None, path_length=None), critical=True)
    )
    if names is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the operator owns SIGTERM (lease release, orderly stop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def new_tls(namespace: str) -> dict[str, bytes]:
    """PEMs of a fresh CA (`ca.crt`) and a serving certificate (`tls.crt`, `tls.key`) for the Service."""
    host = f"{SERVICE_NAME}.{namespace}.svc"
    # The name is in the SAN (what TLS checks): a CN holds at most 64 characters, a namespace is longer.
    return _tls([x509.DNSName(host), x509.DNSName(f"{host}.cluster.local")])


def new_tls_for_host(host: str) -> dict[str, bytes]:
    """PEMs of a fresh CA and a serving certificate for `host` (an IP address or a DNS name)."""
    try:
        name: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        name = x509.DNSName(host)
    return _tls([name])


def _tls(names: list[x509.GeneralName]) -> dict[str, bytes]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("mcpfleet-conversion-ca", ca_key, "mcpfleet-conversion-ca", ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(SERVICE_NAME, key, "mcpfleet-conversion-ca", ca_key, names=names)
    pem = serialization.Encoding.PEM
    return {
        "ca.crt": ca.public_bytes(pem),
        "tls.crt": cert.public_bytes(pem),
        "tls.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    }


async def ensure_tls(api: KubeApi, namespace: str) -> dict[str, bytes]:
    """The webhook's TLS material from its Secret, created on first start."""
    for _ in range(3):
        secret = await api.get("v1", "Secret", namespace, SECRET_NAME)
        if secret is not None:
            data = secret.get("data") or {}
            if all(k in data for k in ("ca.crt", "tls.crt", "tls.key")):
                return {k: base64.b64decode(data[k]) for k in ("ca.crt", "tls.crt", "tls.key")}
        fresh = new_tls(namespace)
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": SECRET_NAME, "namespace": namespace},
            "data": {k: base64.b64encode(v).decode() for k, v in fresh.items()},
        }
        try:
            await api.create(body)
            return fresh
        except ApiError as exc:
            if exc.code != 409:
                raise
            # Another replica created it first: use that one.
    raise RuntimeError(f"Secret {namespace}/{SECRET_NAME} exists but holds no ca.crt / tls.crt / tls.key")


async def inject_ca_bundle(api: KubeApi, namespace: str, ca_pem: bytes) -> list[str]:
    """Point every CRD that converts through the webhook at this namespace's Service, trusting `ca_pem`."""
    service = {"namespace": namespace, "name": SERVICE_NAME, "path": CONVERT_PATH, "port": SERVICE_PORT}
    # A merge patch: drop a URL a CRD may name instead of the Service.
    return await _point_crds(api, {"url": None, "service": service}, ca_pem)


async def inject_url(api: KubeApi, base_url: str, ca_pem: bytes) -> list[str]:
    """Point every CRD that converts through the webhook at `base_url` (an out-of-cluster operator)."""
    return await _point_crds(api, {"url": base_url + CONVERT_PATH, "service": None}, ca_pem)


async def _point_crds(api: KubeApi, where: dict[str, Any], ca_pem: bytes) -> list[str]:
    patched = []
    for kind in ALL_KINDS:
        if not kind.version_changes:
            continue
        client_config = {**where, "caBundle": base64.b64encode(ca_pem).decode()}
        body = {
            "spec": {
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client_config},
                }
            }
        }
        await api.patch("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", kind.info.crd_name, body)
        patched.append(kind.info.crd_name)
    return patched


def _pem_file(name: str, data: bytes) -> str:
    """A path the TLS loader can read `data` from (it takes file names only).

    In memory where Linux allows it (an anonymous memfd, read through /proc/self/fd, kept open for
    the process's life): the operator's pod has a read-only root filesystem and no writable /tmp,
    and the private key is better never on a disk. Elsewhere a 0600 file in a fresh temp folder.
    """
    if hasattr(os, "memfd_create") and Path("/proc/self/fd").is_dir():
        fd = os.memfd_create(f"mcpfleet-conversion-{name}")
        os.write(fd, data)
        return f"/proc/self/fd/{fd}"
    path = Path(tempfile.mkdtemp(prefix="mcpfleet-conversion-")) / name
    path.touch(mode=0o600)
    path.write_bytes(data)
    return str(path)


async def serve_conversion_webhook(
    api: KubeApi, namespace: str, port: int, host: str = "0.0.0.0", counts: ConversionCounts | None = None
) -> asyncio.Task[None]:
    """Ensure the TLS Secret and the CRDs' CA bundle, then serve the webhook (a task of the caller's
    loop), counting what it converts in `counts` (also at its GET /metrics)."""
    tls = await ensure_tls(api, namespace)
    crds = await inject_ca_bundle(api, namespace, tls["ca.crt"])
    return _serve(tls, host, port, crds, counts)


async def serve_out_of_cluster_webhook(
    api: KubeApi, base_url: str, host: str = "0.0.0.0", counts: ConversionCounts | None = None
) -> asyncio.Task[None]:
    """The webhook of an operator outside the cluster: a CA and certificate for the URL's host made
    for this run (no Secret), the CRDs pointed at `base_url`, served on its port."""
    parsed = urlsplit(base_url)
    assert parsed.hostname is not None and parsed.port is not None  # checked by webhook_url_from_env
    tls = new_tls_for_host(parsed.hostname)
    crds = await inject_url(api, base_url, tls["ca.crt"])
    return _serve(tls, host, parsed.port, crds, counts)


def _serve(
    tls: dict[str, bytes], host: str, port: int, crds: list[str], counts: ConversionCounts | None
) -> asyncio.Task[None]:
    cert, key = _pem_file("tls.crt", tls["tls.crt"]), _pem_file("tls.key", tls["tls.key"])
    config = server_config(app(counts), host, port, cert, key, lifespan="off")
    server = _Server(config)
    log.info("conversion webhook on https://%s:%d%s for %s", host, port, CONVERT_PATH, ", ".join(crds))
    return asyncio.create_task(server.serve(), name="conversion-webhook")


def webhook_port_from_env() -> int | None:
    """`MCPFLEET_CONVERSION_WEBHOOK_PORT`: the port to serve on, or None (unset / empty: not served)."""
    raw = os.environ.get("MCPFLEET_CONVERSION_WEBHOOK_PORT", "").strip()
    if not raw:
        return None
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"MCPFLEET_CONVERSION_WEBHOOK_PORT: not a port: {raw!r}") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"MCPFLEET_CONVERSION_WEBHOOK_PORT: not a port: {raw!r}")
    return port


URL_ENV = "MCPFLEET_CONVERSION_WEBHOOK_URL"


def webhook_url_from_env() -> str | None:
    """`MCPFLEET_CONVERSION_WEBHOOK_URL`: `https://HOST:PORT` where the API server reaches an operator
    run outside the cluster, or None (unset / empty). Anything else is refused naming the variable."""
    raw = os.environ.get(URL_ENV, "").strip()
    if not raw:
        return None
    try:
        parsed = urlsplit(raw)
        port = parsed.port
    except ValueError:
        raise ValueError(f"{URL_ENV}: not a URL: {raw[:200]!r}") from None
    if (
        parsed.scheme != "https"
        or not parsed.hostname
        or port is None
        or parsed.username is not None
        or parsed.password is not None
        or parsed.path not in ("", "/")
        or parsed.query
        or parsed.fragment
    ):
        raise ValueError(
            f"{URL_ENV}: must be https://HOST:PORT (the webhook serves {CONVERT_PATH}): {raw[:200]!r}"
        )
    host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    return f"https://{host}:{port}"
