"""`configMap` source: one key of a ConfigMap, read through the Kubernetes API (lightkube)."""

from __future__ import annotations

import base64
from collections.abc import Callable

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import ConfigMap

from mcpfleet.registry.sources.base import Fetched, SourceError, fetched_bytes


class ConfigMapReader:
    def __init__(
        self, source: str, fmt: str, namespace: str, name: str, key: str, client: Callable[[], AsyncClient]
    ) -> None:
        self.source, self.fmt = source, fmt
        self.namespace, self.name, self.key = namespace, name, key
        self._client_factory = client
        self._client: AsyncClient | None = None

    async def fetch(self) -> Fetched:
        where = f"ConfigMap {self.namespace}/{self.name}"
        try:
            if self._client is None:
                self._client = self._client_factory()
            cm = await self._client.get(ConfigMap, self.name, namespace=self.namespace)
        except ApiError as exc:
            raise SourceError(f"cannot read {where}: {exc.status.reason or exc.status.code}") from None
        except Exception as exc:  # network / config errors from the client: report, keep last good data
            raise SourceError(f"cannot read {where}: {type(exc).__name__}: {exc}") from None
        if cm.data and self.key in cm.data:
            content = cm.data[self.key].encode()
        elif cm.binaryData and self.key in cm.binaryData:
            content = base64.b64decode(cm.binaryData[self.key])
        else:
            raise SourceError(f"{where} has no key {self.key!r}")
        return fetched_bytes(self.source, self.fmt, content)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
