"""The rendered proxy config (`proxy.json`) of a plan, read back as the proxy reads it."""

from __future__ import annotations

import json
from typing import Any

from mcpfleet.proxy.config import CONFIG_FILE, parse_proxy_config
from mcpfleet.reconcile.model import WorkloadPlan


def proxy_config(plan: WorkloadPlan, container: str = "proxy") -> dict[str, Any]:
    """`plan`'s proxy.json; checked to be a valid `ProxyConfig` with the command line the proxy gets
    (the server's command after `--`, which the platform may append), and that the container runs
    `mcpfleet proxy --config` on it."""
    found = [f for f in plan.config_files if f.filename == CONFIG_FILE]
    assert found, f"{CONFIG_FILE} not rendered: {[f.filename for f in plan.config_files]}"
    fields: dict[str, Any] = json.loads(found[0].content)
    command = next(c for c in plan.containers if c.name == container).command
    assert command[:4] == ("mcpfleet", "proxy", "--config", "{config_dir}/proxy.json"), command
    child = list(command[command.index("--") + 1 :]) if "--" in command else None
    parse_proxy_config(fields if child is None else {**fields, "command": child or ["image"]})
    return fields
