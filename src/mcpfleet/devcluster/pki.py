"""Certificates and keys of the dev cluster, made with `cryptography` and kept in the state dir.

Owns: one CA (signs the apiserver serving certificate and every client certificate), the serving
certificate, one client certificate per component, the service-account signing key pair, and
kubeconfig rendering. Keys are ECDSA P-256: generation is ~1 ms (RSA-2048 would be ~100 ms each)
and every Kubernetes component accepts them, including ES256 service-account tokens.

Files are created once and reused on later `up`s, so a kubeconfig copied elsewhere keeps working.
Private keys are written with mode 0600 and never logged.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# First address of the service CIDR (10.0.0.0/16): the in-cluster `kubernetes` Service IP.
KUBERNETES_SERVICE_IP = "10.0.0.1"
VALIDITY = datetime.timedelta(days=3650)

# (file stem, common name, organisation). Every component is in system:masters: controllers run
# with the manager's own credentials (no per-controller service accounts), which keeps start fast.
CLIENTS: tuple[tuple[str, str, str], ...] = (
    ("admin", "mcpfleet-admin", "system:masters"),
    ("controller-manager", "system:kube-controller-manager", "system:masters"),
    ("scheduler", "system:kube-scheduler", "system:masters"),
    ("kwok", "kwok-controller", "system:masters"),
    # The apiserver's client identity towards aggregated API servers (requestheader authn).
    ("front-proxy", "front-proxy-client", ""),
)


@dataclass(frozen=True)
class Pki:
    """Paths of the generated material inside `<state>/pki`."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def client_cert(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def client_key(self, name: str) -> Path:
        return self.dir / f"{name}.key"


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path}: expected an EC private key")
    return key


def _sign(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    is_ca: bool = False,
    san: list[x509.GeneralName] | None = None,
    usage: list[x509.ObjectIdentifier] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # Backdated a minute: tolerate small clock differences between cert creation and use.
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    else:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def ensure_pki(directory: Path) -> Pki:
    """Creates whatever is missing (CA, serving cert, client certs, SA keys); returns the paths."""
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)

    if not (pki.ca_cert.is_file() and pki.ca_key.is_file()):
        ca_key = _new_key()
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcpfleet-dev-cluster-ca")])
        ca_cert = _sign(ca_name, ca_key.public_key(), ca_name, ca_key, is_ca=True)
        _write_key(pki.ca_key, ca_key)
        _write_cert(pki.ca_cert, ca_cert)
        # A new CA invalidates everything it signed before.
        for stale in directory.glob("*"):
            if stale not in (pki.ca_key, pki.ca_cert, pki.sa_key, pki.sa_pub):
                stale.unlink()
    ca_key = _load_key(pki.ca_key)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())

    if not (pki.serving_cert.is_file() and pki.serving_key.is_file()):
        key = _new_key()
        names = [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ]
        san: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
        san += [
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address(KUBERNETES_SERVICE_IP)),
        ]
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
        cert = _sign(
            subject,
            key.public_key(),
            ca_cert.subject,
            ca_key,
            san=san,
            usage=[ExtendedKeyUsageOID.SERVER_AUTH],
        )
        _write_key(pki.serving_key, key)
        _write_cert(pki.serving_cert, cert)

    for stem, cn, org in CLIENTS:
        if pki.client_cert(stem).is_file() and pki.client_key(stem).is_file():
            continue
        key = _new_key()
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
        subject = x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        cert = _sign(
            subject, key.public_key(), ca_cert.subject, ca_key, usage=[ExtendedKeyUsageOID.CLIENT_AUTH]
        )
        _write_key(pki.client_key(stem), key)
        _write_cert(pki.client_cert(stem), cert)

    if not (pki.sa_key.is_file() and pki.sa_pub.is_file()):
        sa = _new_key()
        _write_key(pki.sa_key, sa)
        pki.sa_pub.write_bytes(
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    return pki


def ensure_client(pki: Pki, stem: str, cn: str, org: str) -> None:
    """Creates one more client certificate (e.g. the real node's) signed by the cluster CA, once."""
    if pki.client_cert(stem).is_file() and pki.client_key(stem).is_file():
        return
    ca_key = _load_key(pki.ca_key)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    key = _new_key()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    subject = x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = _sign(subject, key.public_key(), ca_cert.subject, ca_key, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    _write_key(pki.client_key(stem), key)
    _write_cert(pki.client_cert(stem), cert)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def render_kubeconfig(pki: Pki, server: str, client: str, cluster_name: str = "mcpfleet-dev") -> str:
    """A self-contained kubeconfig (certificates embedded) for one of CLIENTS."""
    user = f"{cluster_name}-{client}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(pki.client_cert(client)),
                    "client-key-data": _b64(pki.client_key(client)),
                },
            }
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write_private(path: Path, text: str) -> None:
    """Writes a file holding credentials with mode 0600 (atomically: readers never see half)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)
