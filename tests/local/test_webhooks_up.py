"""MCPWebhookConfig on the local platform (`mcpfleet up`): a manifest folder with an MCPServer whose
`webhookConfigRef` names an MCPWebhookConfig, a real webhook server started by the test and the real
`mcp-server-time` from PyPI. The mutating webhook rewrites the tool's `timezone` argument (the
server answers for the rewritten zone), the validating one denies `convert_time`, and every call
carried an HMAC signature made with the local Secret's value, which the webhook server verified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from mcpfleet.policy.guard import FORBIDDEN
from tests.local.conftest import Up, manifest
from tests.local_http import serving
from tests.webhook.webhook_server import WebhookServer

KEY = b"local-webhook-key"


@pytest.mark.timeout(420)
async def test_webhook_config_ref_through_mcpfleet_up(running_up: Any, tmp_path: Path) -> None:
    hooks = WebhookServer(KEY, modes={"mutate": "patch-timezone", "validate": "deny-convert_time"})
    # A local Secret: STATE/secrets/<name>/<key> (or $MCPFLEET_SECRET_HOOK_KEYS_HMAC).
    secret = tmp_path / "state" / "secrets" / "hook-keys" / "hmac"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(KEY)
    async with serving(hooks.app()) as base:
        plain_http = {"insecureSkipVerify": True}
        signed = {"hmacSecretRef": {"name": "hook-keys", "key": "hmac"}, "tlsConfig": plain_http}
        webhooks = {
            "mutating": [{"name": "tz", "url": f"{base}/mutate", "timeout": "5s", **signed}],
            "validating": [{"name": "gate", "url": f"{base}/validate", "timeout": "5s", **signed}],
        }
        server = {
            "image": "uvx://mcp-server-time",
            "transport": "stdio",
            "args": ["--local-timezone=UTC"],
            "webhookConfigRef": {"name": "hooks"},
        }
        up: Up = running_up(
            {
                "hooks.yaml": manifest("MCPWebhookConfig", "hooks", webhooks),
                "time.yaml": manifest("MCPServer", "time", server),
            }
        )
        status = await up.wait_phase("MCPServer", "time", {"Running"}, limit=240)
        async with Client(status["url"], mode="legacy") as c:
            result = await c.call_tool("get_current_time", {"timezone": "UTC"})
            assert not result.is_error
            assert "Asia/Tokyo" in str(result.content)
            with pytest.raises(MCPError) as denied:
                await c.call_tool(
                    "convert_time", {"source_timezone": "UTC", "time": "10:00", "target_timezone": "UTC"}
                )
            assert denied.value.error.code == FORBIDDEN
            assert "gate" in denied.value.error.message
    calls = [c for c in hooks.calls if c.payload["mcp_request"]["method"] == "tools/call"]
    assert {c.path for c in calls} == {"mutate", "validate"}
    assert all(c.signed and c.signature_ok for c in hooks.calls)
    assert all(c.payload["context"]["server_name"] == "time" for c in hooks.calls)
    # The key is in the 0600 Secret file only, never in the rendered webhooks.json.
    config_dir = up.state_dir / "config" / "mcpserver" / "default" / "time"
    assert KEY.decode() not in (config_dir / "webhooks.json").read_text()
    assert (config_dir / "secrets" / "webhook-tz-hmac").stat().st_mode & 0o077 == 0
