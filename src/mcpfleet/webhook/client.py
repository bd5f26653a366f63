"""Calling one webhook: an HTTP POST bounded in time and size, signed when an HMAC key is configured.

* Time: the whole call (connect, send, answer) within the webhook's `timeout` (10 s default, 30 s
  at most), enforced around the call, not per read.
* Size: the answer is read up to `MAX_RESPONSE_BYTES` (1 MiB) and dropped beyond it.
* Signature (ToolHive's): `X-ToolHive-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`
  and `X-ToolHive-Timestamp: <unix seconds>`. The key is read from its file at each call (a rotated
  Secret applies without a restart), at most 64 KiB, never logged or echoed.
* TLS: the CA bundle and the client certificate / key (mTLS) from files, loaded at start;
  `insecureSkipVerify` turns verification off. Proxy variables of the environment are not used: a
  webhook sees every request, so it is reached directly.

Outcomes: `Answer(status, body)` for a 2xx..4xx answer read whole, `CallFailed(reason)` otherwise
(unreachable, timeout, 5xx, too large). The reasons name no secret and quote no response bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from mcpfleet.httplimits import IDENTITY, BodyTooLarge, BodyUnreadable, read_capped
from mcpfleet.webhook.config import Endpoint
from mcpfleet.webhook.protocol import MAX_RESPONSE_BYTES

SIGNATURE_HEADER = "X-ToolHive-Signature"
TIMESTAMP_HEADER = "X-ToolHive-Timestamp"
MAX_SECRET_BYTES = 64 * 1024


class CallFailed(Exception):
    """The webhook could not give an answer; the message says why (safe to show and log)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def sign(secret: bytes, timestamp: int, payload: bytes) -> str:
    """ToolHive's signature of `payload` sent at `timestamp` (unix seconds)."""
    mac = hmac.new(secret, f"{timestamp}.".encode() + payload, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(secret: bytes, timestamp: int, payload: bytes, signature: str) -> bool:
    """Whether `signature` is `sign(secret, timestamp, payload)` (constant-time)."""
    return hmac.compare_digest(sign(secret, timestamp, payload), signature)


def ssl_context(endpoint: Endpoint) -> ssl.SSLContext | bool:
    """The TLS settings of `endpoint` (raises OSError / ssl.SSLError for unusable files)."""
    tls = endpoint.tls_config
    if tls is None:
        return True
    context = ssl.create_default_context(cafile=tls.ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.client_cert_file is not None and tls.client_key_file is not None:
        context.load_cert_chain(tls.client_cert_file, tls.client_key_file)
    if tls.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _read_secret(path: str) -> bytes:
    file = Path(path)
    with file.open("rb") as handle:
        value = handle.read(MAX_SECRET_BYTES + 1)
    if len(value) > MAX_SECRET_BYTES:
        raise CallFailed(f"HMAC key file larger than {MAX_SECRET_BYTES} bytes")
    value = value.rstrip(b"\r\n")
    if not value:
        raise CallFailed("HMAC key file is empty")
    return value


class WebhookClient:
    """Calls one webhook (one pooled HTTP client per webhook, made at start)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.timeout = endpoint.timeout_seconds
        self._http = httpx.AsyncClient(
            verify=ssl_context(endpoint),
            timeout=self.timeout,
            trust_env=False,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )

    async def call(self, payload: bytes) -> Answer:
        """POST `payload`; the answer, or CallFailed."""
        try:
            return await asyncio.wait_for(self._call(payload), self.timeout)
        except TimeoutError:
            raise CallFailed(f"no answer within {self.timeout:g}s") from None

    async def _call(self, payload: bytes) -> Answer:
        headers = {"Content-Type": "application/json", "Accept": "application/json", **IDENTITY}
        if self.endpoint.hmac_secret_file is not None:
            try:
                secret = _read_secret(self.endpoint.hmac_secret_file)
            except OSError as exc:
                raise CallFailed(f"HMAC key file unreadable ({exc.strerror or type(exc).__name__})") from None
            timestamp = int(time.time())
            headers[SIGNATURE_HEADER] = sign(secret, timestamp, payload)
            headers[TIMESTAMP_HEADER] = str(timestamp)
        try:
            async with self._http.stream("POST", self.endpoint.url, content=payload, headers=headers) as resp:
                if resp.status_code >= 500:
                    raise CallFailed(f"HTTP {resp.status_code}")
                try:
                    return Answer(resp.status_code, await read_capped(resp, MAX_RESPONSE_BYTES))
                except BodyTooLarge:
                    raise CallFailed(f"answer larger than {MAX_RESPONSE_BYTES} bytes") from None
                except BodyUnreadable as exc:
                    raise CallFailed(f"answer unreadable ({exc})") from None
        except httpx.TimeoutException:
            raise CallFailed(f"no answer within {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise CallFailed(f"unreachable ({type(exc).__name__})") from None
        except ssl.SSLError as exc:
            raise CallFailed(f"TLS failed ({exc.reason or type(exc).__name__})") from None

    async def aclose(self) -> None:
        await self._http.aclose()
