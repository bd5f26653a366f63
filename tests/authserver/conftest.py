"""The test IdP of the embedded authorization server's `mcpfleet up` tests, with the local Secrets the
manifests name."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.oidc import Issuer
from tests.vmcp.servers import Served

SECRETS = ("upstream-secret-value", "h" * 40, "remote-static-token")
"""The values of those Secrets: the upstream client secret, the HMAC key, a remote's bearer token."""


@pytest.fixture
async def idp(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Issuer]:
    """The test IdP with the upstream client (oauth2), and the local Secrets the manifests name."""
    issuer = Issuer()
    issuer.clients["mcpfleet"] = SECRETS[0]
    served = await Served(issuer).start()
    issuer.base = served.base
    monkeypatch.setenv("MCPFLEET_SECRET_IDP_CLIENT_SECRET", SECRETS[0])
    monkeypatch.setenv("MCPFLEET_SECRET_AS_KEYS_HMAC", SECRETS[1])
    monkeypatch.setenv("MCPFLEET_SECRET_REMOTE_TOKEN", SECRETS[2])
    yield issuer
    await served.stop()
