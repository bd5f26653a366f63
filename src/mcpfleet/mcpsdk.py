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

The SDK's wire types package `mcp_types` is deferred too (issue 19): its `__init__` imports every
type of the protocol (`mcp_types._types`, ~150 pydantic models: a third of a stdio proxy's start),
where the SDK's streamable HTTP transport, all a proxy serves with, needs only the JSON-RPC
envelope models (`mcp_types.jsonrpc`, which the `__init__` re-exports unchanged), four string
constants, and one model class that its `mcp.shared.inbound` calls only to describe an unsupported
protocol version. Served without the `__init__`: every name of `mcp_types.jsonrpc.__all__` (the very
objects, from that module), the constants (`TYPES_CONSTANTS`: their values, checked against the
SDK's by tests/cli/test_lazy_imports.py) and, for the names of `TYPES_LATER` only, a stand-in that
runs the `__init__` when first called or asked an attribute; the `__init__`, once run (for whatever
reason), swaps every module-level reference to a stand-in for the real class. Any other name runs it.

`prometheus_client`'s too: its `__init__` loads the exposition format (an HTTP server, urllib) and
the default registry's collectors, where a service counts with `prometheus_client.metrics` and
renders `/metrics` with `prometheus_client.exposition` when first asked.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

PACKAGES = ("mcp", "mcp.server")
UVICORN = "uvicorn"
TYPES = "mcp_types"
PROMETHEUS = "prometheus_client"
"""Deferred too: the services count with `prometheus_client.metrics` and render `/metrics` with
`prometheus_client.exposition` when asked; the package's `__init__` loads the exposition (an HTTP
server, urllib, snappy) and the default registry's process collectors at once."""
CHEAP: dict[str, dict[str, str]] = {UVICORN: {"Config": "uvicorn.config"}}
"""Per deferred package: names served without its `__init__`, from the module its `__init__` imports them from."""
SUBMODULES: dict[str, frozenset[str]] = {PROMETHEUS: frozenset({"values"})}
"""Per deferred package: submodules its own modules import as `from . import <name>` (which asks the
package for the name first), served as the submodule without the `__init__`."""
TYPES_REEXPORTED = "mcp_types.jsonrpc"
"""The module whose `__all__` `mcp_types/__init__.py` re-exports unchanged (and that loads without it)."""
TYPES_CONSTANTS: dict[str, str] = {
    "DEFAULT_NEGOTIATED_VERSION": "2025-03-26",
    "PROTOCOL_VERSION_META_KEY": "io.modelcontextprotocol/protocolVersion",
    "CLIENT_INFO_META_KEY": "io.modelcontextprotocol/clientInfo",
    "CLIENT_CAPABILITIES_META_KEY": "io.modelcontextprotocol/clientCapabilities",
}
"""Constants of `mcp_types._types` the transports import, by value (tests compare them with the SDK's)."""
TYPES_LATER = ("UnsupportedProtocolVersionErrorData",)
"""Classes of `mcp_types._types` an SDK module the proxy loads imports but only calls (`mcp.shared.inbound`)."""
_MISSING = object()
_lock = threading.RLock()

Cheap = Callable[[ModuleType, str, Callable[[], None]], object]
"""Per deferred package: the value of a name served without its `__init__` (`_MISSING`: none); gets
the package, the name and the function that runs the `__init__`."""


class _Later:
    """Stands for a class of a deferred package (`TYPES_LATER`) until it is called or asked an
    attribute, which runs the package's `__init__` and forwards to the real class."""

    def __init__(self, package: ModuleType, name: str, run_init: Callable[[], None]) -> None:
        self._package = package
        self._name = name
        self._run_init = run_init

    def _real(self) -> Any:
        self._run_init()
        return self._package.__dict__[self._name]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # (its own fields, pickling / copy probes: not forwarded)
            raise AttributeError(attr)
        return getattr(self._real(), attr)

    def __repr__(self) -> str:
        return f"<deferred {self._package.__name__}.{self._name}>"


_stand_ins: dict[str, _Later] = {}


def _cheap_uvicorn(package: ModuleType, attr: str, run_init: Callable[[], None]) -> object:
    source = CHEAP[UVICORN].get(attr)
    return _MISSING if source is None else getattr(importlib.import_module(source), attr)


def _cheap_types(package: ModuleType, attr: str, run_init: Callable[[], None]) -> object:
    if attr in TYPES_CONSTANTS:
        return TYPES_CONSTANTS[attr]
    if attr in TYPES_LATER:
        return _stand_ins.setdefault(attr, _Later(package, attr, run_init))
    if attr.startswith("__"):
        return _MISSING  # (`__all__`, `__version__`...: the package's own)
    reexported = importlib.import_module(TYPES_REEXPORTED)
    return getattr(reexported, attr) if attr in reexported.__all__ else _MISSING


def _swap_stand_ins(package: ModuleType) -> None:
    """Once `mcp_types`' `__init__` ran: every module-level reference to a stand-in becomes the real class."""
    for name, stand_in in list(_stand_ins.items()):
        real = package.__dict__.get(name)
        if real is None:
            continue
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if isinstance(namespace, dict) and namespace.get(name) is stand_in:
                namespace[name] = real
        del _stand_ins[name]


def _deferred(name: str) -> ModuleType | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return None  # not installed (or not a package): nothing to defer
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    cheap = _CHEAP_OF.get(name)
    submodules = SUBMODULES.get(name, frozenset())

    def run_init() -> None:
        with _lock:
            if module.__dict__.get("__getattr__") is __getattr__:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)  # the package's own __init__, in its own namespace
                if name == TYPES:
                    _swap_stand_ins(module)

    def __getattr__(attr: str) -> object:  # PEP 562: only for names the module does not have yet
        if cheap is not None and module.__dict__.get("__getattr__") is __getattr__:
            value = cheap(module, attr, run_init)
            if value is not _MISSING:
                return value
        if attr in submodules and module.__dict__.get("__getattr__") is __getattr__:
            return importlib.import_module(f"{name}.{attr}")
        run_init()
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__dict__["__getattr__"] = __getattr__
    return module


_CHEAP_OF: dict[str, Cheap] = {UVICORN: _cheap_uvicorn, TYPES: _cheap_types}


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
