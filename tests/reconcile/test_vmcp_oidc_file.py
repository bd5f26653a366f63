"""The rendered vMCP config names only what the renderer set in `incomingAuth.oidc`.

Next to an `oidcFile` (a mounted ConfigMap key), `oidc` overrides the file key by key. Before, the
rendered config carried the model's defaults (`scopes: []`, `insecureAllowHttp: false`,
`jwksCacheSeconds`), which replaced the ConfigMap's own values when the gateway merged them.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcpfleet.vmcp.config import parse_config
from tests.reconcile.test_oidc import CONFIG_MAP, REF, k8s, vmcp_plan


def _resolved_with(auth: str, settings: dict[str, object], tmp_path: Path) -> dict[str, object]:
    plan, incoming = vmcp_plan(f"{{type: oidc, {auth}}}", k8s())
    assert plan.problems == ()
    file = tmp_path / "oidc.json"
    file.write_text(json.dumps(settings))
    config = parse_config({"incomingAuth": {**incoming, "oidcFile": str(file)}})
    oidc = config.incoming_auth.resolved().oidc
    assert oidc is not None
    return oidc.model_dump()


def test_config_map_settings_are_not_overridden_by_defaults(tmp_path: Path) -> None:
    settings = {
        "issuer": "http://idp.local",
        "audience": "gw",
        "scopes": ["mcp", "read"],
        "insecureAllowHTTP": True,
        "jwksCacheSeconds": 60,
    }
    _, incoming = vmcp_plan(f"{{type: oidc, {CONFIG_MAP}}}", k8s())
    assert incoming["oidc"] == {}
    oidc = _resolved_with(CONFIG_MAP, settings, tmp_path)
    assert oidc["scopes"] == ["mcp", "read"] and oidc["insecure_allow_http"] is True
    assert oidc["jwks_cache_seconds"] == 60


def test_oidc_config_ref_overrides_only_audience_and_scopes(tmp_path: Path) -> None:
    settings = {"issuer": "http://idp.local", "audience": "other", "insecureAllowHTTP": True}
    oidc = _resolved_with(REF, settings, tmp_path)
    assert oidc["audience"] == "time" and oidc["scopes"] == ["mcp", "read"]
    assert oidc["insecure_allow_http"] is True
