"""The request-forgery guard of the OIDC fetches (`mcpfleet.netguard`, ToolHive's private-address
rule): hostile JWKS URLs in every spelling are refused on the address actually connected to, a name
resolving to a private address is refused however it resolves, `jwksAllowPrivateIP` lifts the guard,
and the classifier follows ToolHive's ranges (NAT64 / 6to4 / IPv4-mapped judged by the embedded IPv4)."""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
import urllib.parse
from typing import Any

import aiohttp
import pytest

from mcpfleet.auth.oidc import AuthError, OIDCAuthenticator, OIDCSettings
from mcpfleet.netguard import PrivateAddressError, guarded_socket_factory, is_loopback_host, is_private
from tests.auth.test_token_corpus import local_issuer

ISSUER = "https://idp.example"
PARSER_REFUSES = ("2852039166", "0251.0376.0251.0376")
"""169.254.169.254 spelled as one decimal number and in octal: the URL parser refuses these hosts."""


@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("169.254.169.254", True),
        ("127.0.0.1", True),
        ("0.0.0.0", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("100.64.0.1", True),
        ("224.0.0.1", True),
        ("255.255.255.255", True),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("fd00::1", True),
        ("::ffff:169.254.169.254", True),
        ("64:ff9b::a9fe:a9fe", True),  # NAT64 of the metadata address
        ("64:ff9b::808:808", False),  # NAT64 of 8.8.8.8
        ("2002:a9fe:a9fe::", True),  # 6to4 of the metadata address
        ("2002:808:808::", False),
        ("2001::1", True),  # Teredo: blocked wholesale
        ("8.8.8.8", False),
        ("2606:4700:4700::1111", False),
    ],
)
def test_classifier_follows_toolhive(address: str, private: bool) -> None:
    assert is_private(ipaddress.ip_address(address)) is private


def test_loopback_hosts() -> None:
    assert is_loopback_host("localhost") and is_loopback_host("127.0.0.9") and is_loopback_host("[::1]")
    assert not is_loopback_host("localhost.example.com") and not is_loopback_host("10.0.0.1")


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "[::1]",
        "0.0.0.0",
        "2852039166",  # 169.254.169.254 as one decimal number
        "0251.0376.0251.0376",  # ... in octal
        "0x7f000001",  # 127.0.0.1 in hex
        "[::ffff:127.0.0.1]",
        "localhost",  # a name resolving to a loopback address
    ],
)
async def test_hostile_jwks_urls_are_refused_at_connect(host: str, caplog: pytest.LogCaptureFixture) -> None:
    async with local_issuer() as issuer:
        port = urllib.parse.urlsplit(issuer.base).port
        jwks = f"http://{host}:{port}/jwks"
        auth = OIDCAuthenticator(
            OIDCSettings.model_validate(
                {"issuer": ISSUER, "audience": "a", "jwksUrl": jwks, "insecureAllowHTTP": True}
            )
        )
        started = time.monotonic()
        try:
            with (
                caplog.at_level(logging.ERROR),
                pytest.raises(AuthError, match="cannot fetch the issuer's keys"),
            ):
                await auth.authenticate("Bearer " + issuer.token("r1", aud="a", iss=ISSUER))
        finally:
            await auth.close()
        assert issuer.jwks_hits == 0, "the JWKS was fetched from a non-public address"
        assert time.monotonic() - started < 5, "refused before connecting, not by a timeout"
        if host not in PARSER_REFUSES:
            assert "refused to connect to the non-public address" in caplog.text, caplog.text


def test_other_spellings_resolve_to_the_address_the_guard_checks() -> None:
    """The decimal and octal spellings are refused by the URL parser already; should one get through
    (another client, another parser), the resolver turns it into the address the guard refuses."""
    for spelling in PARSER_REFUSES:
        (family, type_, proto, _, sockaddr) = socket.getaddrinfo(spelling, 80, type=socket.SOCK_STREAM)[0]
        assert sockaddr[0] == "169.254.169.254"
        with pytest.raises(PrivateAddressError):
            guarded_socket_factory()((family, type_, proto, "", sockaddr))


async def test_jwks_allow_private_ip_lifts_the_guard() -> None:
    async with local_issuer() as issuer:
        port = urllib.parse.urlsplit(issuer.base).port
        config = {
            "issuer": ISSUER,
            "audience": "a",
            "jwksUrl": f"http://localhost:{port}/jwks",
            "insecureAllowHTTP": True,
            "jwksAllowPrivateIP": True,
        }
        auth = OIDCAuthenticator(OIDCSettings.model_validate(config))
        try:
            claims = await auth.authenticate("Bearer " + issuer.token("r1", aud="a", iss=ISSUER))
        finally:
            await auth.close()
        assert claims is not None and claims["sub"] == "user-1" and issuer.jwks_hits == 1


class _Rebinding(aiohttp.abc.AbstractResolver):
    """A resolver under an attacker's control: the name answers with the metadata address."""

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[dict[str, Any]]:
        return [
            {
                "hostname": host,
                "host": "169.254.169.254",
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": 0,
            }
        ]

    async def close(self) -> None:
        return None


async def test_the_check_is_on_the_resolved_address_not_the_name() -> None:
    connector = aiohttp.TCPConnector(resolver=_Rebinding(), socket_factory=guarded_socket_factory())
    async with aiohttp.ClientSession(connector=connector) as http:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await http.get("http://public.example/jwks", timeout=aiohttp.ClientTimeout(total=5))
    assert isinstance(caught.value.os_error, PrivateAddressError)
