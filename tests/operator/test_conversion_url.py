"""`MCPFLEET_CONVERSION_WEBHOOK_URL` (the out-of-cluster operator's webhook address): only
`https://HOST:PORT` is taken, anything else is refused naming the variable; the certificate made for
the run names HOST as TLS checks it (an IP address SAN or a DNS SAN)."""

from __future__ import annotations

import ipaddress

import pytest
from cryptography import x509
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.operator.conversion import URL_ENV, new_tls_for_host, webhook_url_from_env


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("https://127.0.0.1:9443", "https://127.0.0.1:9443"),
        ("  https://dev.example:9443/ ", "https://dev.example:9443"),
        ("https://[::1]:9443", "https://[::1]:9443"),
        ("", None),
    ],
)
def test_accepted(monkeypatch: pytest.MonkeyPatch, raw: str, expected: str | None) -> None:
    monkeypatch.setenv(URL_ENV, raw)
    assert webhook_url_from_env() == expected


HOSTILE = [
    "http://127.0.0.1:9443",
    "https://127.0.0.1",
    "https://127.0.0.1:99999",
    "https://user:pw@127.0.0.1:9443",
    "https://127.0.0.1:9443/convert",
    "https://127.0.0.1:9443?x=1",
    "https://127.0.0.1:9443#f",
    "https://:9443",
    "https://[::1:9443",
    "127.0.0.1:9443",
    "https://127.0.0.1:port",
    "x" * 10_000,
]


@pytest.mark.parametrize("raw", HOSTILE)
def test_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(URL_ENV, raw)
    with pytest.raises(ValueError, match=URL_ENV) as caught:
        webhook_url_from_env()
    assert len(str(caught.value)) < 400  # a long value is cut, not echoed whole


@given(st.text(max_size=300).filter(lambda t: "\x00" not in t))
def test_any_text_is_a_url_or_a_named_refusal(raw: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(URL_ENV, raw)
        try:
            url = webhook_url_from_env()
        except ValueError as exc:
            assert URL_ENV in str(exc)
            return
    assert url is None or url.startswith("https://")


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("127.0.0.1", x509.IPAddress(ipaddress.ip_address("127.0.0.1"))),
        ("dev.example", x509.DNSName("dev.example")),
    ],
)
def test_certificate_names_the_host(host: str, name: x509.GeneralName) -> None:
    tls = new_tls_for_host(host)
    cert = x509.load_pem_x509_certificate(tls["tls.crt"])
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert list(san) == [name]
    ca = x509.load_pem_x509_certificate(tls["ca.crt"])
    assert cert.issuer == ca.subject
