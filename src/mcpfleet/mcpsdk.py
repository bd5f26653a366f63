"""The MCP SDK's packages `mcp` and `mcp.server`, registered so their `__init__` runs on first use.

The services use a few SDK modules (`mcp.server.streamable_http`, `mcp.server.transport_security`,
`mcp.shared.*`), but Python runs every parent package's `__init__` first, and the SDK's load its
whole client and server (`mcp.client`, `mcp.server.mcpserver`, `mcp.server.lowlevel`, every
protocol version's wire types): about half a second of a proxy's start. `register()` puts each of
the two packages in `sys.modules` as its real module object (same spec, `__path__`, `__file__`)
whose `__init__` has not run yet; submodules import as usual, and the first attribute the package
itself does not have (`from mcp import ClientSession`, `mcp.server.Server`) runs its `__init__`
once, after which the package is exactly what a plain import gives. Anything that needs the SDK's
top-level names therefore still gets them; only code that never asks skips the cost.

Called from `mcpfleet/__init__.py`, so it is in place before any mcpfleet module imports the SDK; a
process that imported `mcp` already keeps it as it is.

uvicorn's package is deferred the same way: its `__init__` imports its command line (`uvicorn.main`,
and with it click), which a service that builds a `uvicorn.config.Config` and a
`uvicorn.server.Server` never uses. Its one name its own modules import from the package
(`from uvicorn import Config`, in `uvicorn.lifespan.on`) is answered without the `__init__`, from
the module the `__init__` takes it from (`CHEAP`); any other name runs the `__init__`.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType

PACKAGES = ("mcp", "mcp.server")
UVICORN = "uvicorn"
TYPES = "mcp_types"
"""Deferred too: the gateway validates a message with the wire types of its protocol era alone
(`jsonrpc.check_params`), without the version-free models the package's `__init__` builds."""
PROMETHEUS = "prometheus_client"
"""Deferred too: the gateway counts with `prometheus_client.metrics` and renders `/metrics` with
`prometheus_client.exposition` when asked (`vmcp/metrics.py`); the package's `__init__` loads the
exposition (an HTTP server, urllib, snappy) and the default registry's process collectors at once."""
CHEAP: dict[str, dict[str, str]] = {UVICORN: {"Config": "uvicorn.config"}}
"""Per deferred package: names served without its `__init__`, from the module its `__init__` imports them from."""
SUBMODULES: dict[str, frozenset[str]] = {PROMETHEUS: frozenset({"values"})}
"""Per deferred package: submodules its own modules import as `from . import <name>` (which asks the
package for the name first), served as the submodule without the `__init__`."""
_lock = threading.RLock()


def _deferred(name: str) -> ModuleType | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return None  # not installed (or not a package): nothing to defer
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    cheap = CHEAP.get(name, {})
    submodules = SUBMODULES.get(name, frozenset())

    def __getattr__(attr: str) -> object:  # PEP 562: only for names the module does not have yet
        if attr in cheap and module.__dict__.get("__getattr__") is __getattr__:
            return getattr(importlib.import_module(cheap[attr]), attr)
        if attr in submodules and module.__dict__.get("__getattr__") is __getattr__:
            return importlib.import_module(f"{name}.{attr}")
        with _lock:
            if module.__dict__.get("__getattr__") is __getattr__:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)  # the package's own __init__, in its own namespace
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__dict__["__getattr__"] = __getattr__
    return module


def register() -> None:
    """Defer the `__init__` of `mcp`, `mcp.server`, `uvicorn`, `mcp_types` and `prometheus_client`
    (no-op for a package that is imported already or missing)."""
    with _lock:
        for name in (UVICORN, TYPES, PROMETHEUS):
            if name not in sys.modules:
                module = _deferred(name)
                if module is not None:
                    sys.modules[name] = module
        if PACKAGES[0] in sys.modules:
            return
        for name in PACKAGES:
            module = _deferred(name)
            if module is None:
                return
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                sys.modules[parent].__dict__[child] = module
