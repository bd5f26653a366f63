"""One declaration of a command's options, two parsers: typer's (the full CLI) and a fast one.

The service commands (`mcpfleet proxy`, `mcpfleet vmcp serve`, `mcpfleet registry serve`) start
serving in a fraction of a second, and typer with its click and the building of every command group
is a large part of that (issue 19). Their options are declared once, as `Opt(...)` defaults of the
command function (the same arguments as `typer.Option`); from that one declaration:

- `typer_command(func)` gives typer the same function with `typer.Option` defaults (help, errors,
  completion: the full CLI, unchanged);
- `parse(func, argv)` reads the plain cases without importing typer or click: `--name VALUE`,
  `--name=VALUE`, a short name and its value, flags, repeated options, and, for a command taking a
  command line, everything after `--`. Anything else (`--help`, an unknown or misspelled option, a
  missing or unusual value, a positional argument) answers None, and the caller hands the argv to
  the full CLI, which then says exactly what it always said. A test checks that both parsers agree
  wherever the fast one answers (tests/cli/test_fast_entry.py).

This module imports neither typer nor click at import time.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUIRED: Any = ...
"""The default of an option that must be given (typer's `...`)."""


@dataclass(frozen=True)
class Option:
    """An option as `typer.Option(default, *flags, help=...)` takes it."""

    default: Any
    flags: tuple[str, ...]
    help: str


def Opt(default: Any, *flags: str, help: str) -> Any:
    """Declare an option (the default of a command function's parameter), as `typer.Option` would."""
    return Option(default, flags, help)


# The annotations the fast parser converts (strings: the command modules use postponed annotations),
# each with the shape of a value it accepts; any other value goes to typer, which converts or refuses.
_INT = re.compile(r"[0-9]{1,9}")
_FLOAT = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?")
_CONVERT: dict[str, tuple[Callable[[str], Any], re.Pattern[str] | None]] = {
    "str": (str, None),
    "int": (int, _INT),
    "float": (float, _FLOAT),
    "Path": (Path, None),
}


@dataclass(frozen=True)
class _Param:
    name: str
    option: Option
    convert: Callable[[str], Any]
    shape: re.Pattern[str] | None
    flag: bool
    multiple: bool


def _params(func: Callable[..., Any]) -> dict[str, _Param]:
    """The options of `func` by flag. Raises TypeError for an option not declared with `Opt` or
    of a type the fast parser cannot convert (tests/cli/test_fast_entry.py parses with every service
    command, so a new option of another kind fails there, not in a user's hands)."""
    by_flag: dict[str, _Param] = {}
    for p in inspect.signature(func).parameters.values():
        if p.default is inspect.Parameter.empty:
            continue  # the command line after `--`
        if not isinstance(p.default, Option):
            raise TypeError(f"{func.__name__}({p.name}): declare the option with Opt, not {p.default!r}")
        annotation = str(p.annotation).removesuffix(" | None")
        multiple = annotation.startswith("list[")
        base = annotation.removeprefix("list[").removesuffix("]") if multiple else annotation
        if base == "bool" and not multiple:
            param = _Param(p.name, p.default, bool, None, flag=True, multiple=False)
        elif base in _CONVERT:
            convert, shape = _CONVERT[base]
            param = _Param(p.name, p.default, convert, shape, flag=False, multiple=multiple)
        else:
            raise TypeError(f"{func.__name__}({p.name}): no fast conversion for {p.annotation!r}")
        for flag in p.default.flags:
            by_flag[flag] = param
    return by_flag


_cache: dict[Callable[..., Any], dict[str, _Param]] = {}


def parse(
    func: Callable[..., Any], argv: list[str], *, command_line: bool = False
) -> tuple[list[str], dict[str, Any]] | None:
    """`func`'s keyword arguments from `argv` (and the command line after `--` if `command_line`),
    or None: a case for the full CLI."""
    by_flag = _cache.get(func)
    if by_flag is None:
        by_flag = _cache[func] = _params(func)
    values: dict[str, Any] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--" and command_line:
            rest = argv[i:]
            break
        flag, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        param = by_flag.get(flag)
        if param is None:
            return None  # --help, a typo, a positional argument, `-cVALUE`: typer's business
        if param.flag:
            if eq:
                return None
            values[param.name] = True
            continue
        if not eq:
            if i >= len(argv) or argv[i].startswith("-"):
                return None
            value = argv[i]
            i += 1
        if not value or (param.shape is not None and not param.shape.fullmatch(value)):
            return None
        converted = param.convert(value)
        if param.multiple:
            values.setdefault(param.name, []).append(converted)
        else:
            values[param.name] = converted
    params = _with_defaults(by_flag, values)
    return None if params is None else (rest, params)


def _with_defaults(by_flag: dict[str, _Param], values: dict[str, Any]) -> dict[str, Any] | None:
    """`values` and the default of every option not given (None: a required one is missing)."""
    params: dict[str, Any] = {}
    for param in {id(p): p for p in by_flag.values()}.values():
        if param.name in values:
            params[param.name] = values[param.name]
        elif param.option.default is REQUIRED:
            return None  # typer says which one is missing
        elif param.multiple:  # as typer passes it: a list default as a list, None as click's ()
            default = param.option.default
            params[param.name] = () if default is None else list(default)
        else:
            params[param.name] = param.option.default
    return params


def typer_command(func: Callable[..., Any], *, command_line: bool = False) -> Callable[..., Any]:
    """`func` as typer takes it: each `Opt` default a `typer.Option`; with `command_line`, a first
    parameter for typer's context, whose extra arguments (after `--`) become `func`'s first argument."""
    import functools
    import typing

    import typer

    _params(func)  # every option declared with Opt, of a type both parsers read (else TypeError)
    signature = inspect.signature(func)
    hints = typing.get_type_hints(func)
    params = [
        p.replace(
            annotation=hints.get(p.name, p.annotation),
            default=typer.Option(p.default.default, *p.default.flags, help=p.default.help),
        )
        for p in signature.parameters.values()
        if isinstance(p.default, Option)
    ]
    if command_line:
        context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
        params.insert(0, context)

        @functools.wraps(func)
        def with_context(ctx: typer.Context, **kwargs: Any) -> Any:
            return func(list(ctx.args), **kwargs)

        wrapper: Callable[..., Any] = with_context
    else:

        @functools.wraps(func)
        def plain(**kwargs: Any) -> Any:
            return func(**kwargs)

        wrapper = plain
    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper
