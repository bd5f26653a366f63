"""The gateway's live settings: its config and what it takes in place when the file changes.

Owns the current `VMCPConfig`, the composite tools by name, the optimizer (`ToolFinder`), the
code-mode runner and the policy (Cedar authorization + audit log). `reconfigure` swaps the
live-applicable ones (`LIVE` and `authz`) of a re-read config in place; the caller (the gateway)
then rebuilds the aggregate and tells clients. Other fields are not taken: the platforms restart
the gateway when they change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Literal

from mcpfleet.api.gatewayconfig import CompositeTool
from mcpfleet.policy.config import AuthzConfigError
from mcpfleet.policy.engine import PolicyEngine
from mcpfleet.policy.guard import Policy, audit_log
from mcpfleet.vmcp.codemode import CodeRunner
from mcpfleet.vmcp.config import VMCPConfig
from mcpfleet.vmcp.optimizer import ToolFinder

log = logging.getLogger(__name__)

LIVE = frozenset({"aggregation", "composite_tools", "tool_configs", "optimizer", "code_mode"})
"""The config fields (besides `authz`) a running gateway takes from its re-read file."""


class Features:
    """The current config and the parts built from it (see the module docstring)."""

    def __init__(self, config: VMCPConfig, config_dir: Path | None) -> None:
        self.config = config
        self._config_dir = config_dir
        self.composites: dict[str, CompositeTool] = {c.name: c for c in config.composite_tools}
        self.policy = Policy(
            engine=PolicyEngine(config.authz, base_dir=config_dir) if config.authz else None,
            audit=audit_log(config.audit, config.name, config_dir)
            if config.audit and config.audit.enabled
            else None,
        )
        self.finder: ToolFinder | None = ToolFinder(config.optimizer) if config.optimizer else None
        self.code: CodeRunner | None = CodeRunner(config.code_mode) if config.code_mode.enabled else None
        self._bg: set[asyncio.Task[Any]] = set()

    def own_tools(self) -> bool:
        """Whether the gateway offers tools of its own (composite, optimizer or code-mode tools)."""
        return bool(self.composites or self.finder or self.code)

    def reconfigure(self, config: VMCPConfig) -> Literal["live", "authz"] | None:
        """Take the live-applicable settings of a re-read config: "live" when those (`LIVE`) changed,
        "authz" when only the authorization policies did, None when neither."""
        authz_changed = self._reconfigure_authz(config)
        if config.model_dump(include=set(LIVE)) == self.config.model_dump(include=set(LIVE)):
            return "authz" if authz_changed else None
        old = self.config
        self.config = self.config.model_copy(update={k: getattr(config, k) for k in LIVE})
        self.composites = {c.name: c for c in config.composite_tools}
        if config.optimizer != old.optimizer:
            if self.finder is not None:
                self._spawn(self.finder.close())
            self.finder = ToolFinder(config.optimizer) if config.optimizer else None
        if config.code_mode != old.code_mode:
            if self.code is not None:
                self._spawn(self.code.close())
            self.code = CodeRunner(config.code_mode) if config.code_mode.enabled else None
        elif self.code is not None:
            # A reload ends the idle spare too: it was started for the old settings and catalogue.
            self._spawn(self.code.drop_spare())
        return "live"

    def _reconfigure_authz(self, config: VMCPConfig) -> bool:
        """Take a changed `authz` in place (sessions stay); an invalid one keeps the current policies."""
        if config.authz == self.config.authz:
            return False
        try:
            if config.authz is None:
                self.policy.engine = None
            elif self.policy.engine is None:
                self.policy.engine = PolicyEngine(config.authz, base_dir=self._config_dir)
            else:
                self.policy.engine.replace(config.authz)
        except AuthzConfigError as exc:
            log.warning("authz changed but was not applied (keeping the current policies): %s", exc)
            return False
        self.config = self.config.model_copy(update={"authz": config.authz})
        log.info("applied the authz policies of the new config")
        return True

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def close(self) -> None:
        if self.finder is not None:
            await self.finder.close()
        if self.code is not None:
            await self.code.close()
