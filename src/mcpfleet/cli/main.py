"""Entry point of the `mcpfleet` command (the console script): a fast path for the services.

`mcpfleet proxy`, `mcpfleet vmcp serve` and `mcpfleet registry serve` are what containers and
`mcpfleet up` start, and how soon they answer is the start of every workload (issue 19). For them,
`main()` reads the argv with `cli.options.parse` from the command's one declaration of its options,
without importing typer or click or building every command group: a fair share of a service's
start. Everything else — the other commands, `--help`, and any argv the fast parser leaves alone
(an error, a rare form) — goes to the full typer CLI (`cli/app.py`), which answers as it always did.
A usage error raised by a service command on the fast path is reported as typer would report it.

`app` and `command()` (the full CLI) are still importable from here.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

# The commands with a fast path: argv prefix -> (module, function, takes a command line after `--`).
FAST: dict[tuple[str, ...], tuple[str, str, bool]] = {
    ("proxy",): ("mcpfleet.cli.proxy", "proxy", True),
    ("vmcp", "serve"): ("mcpfleet.cli.vmcp", "serve", False),
    ("registry", "serve"): ("mcpfleet.cli.registry", "serve", False),
    ("embeddings", "serve"): ("mcpfleet.cli.embeddings", "serve", False),
}


def _report(path: tuple[str, ...], exc: Exception) -> NoReturn:
    """Exit as typer's standalone mode does for an error a command raised: a usage error with the
    command's usage line and hint, `typer.Exit` with its code; anything else propagates."""
    import typer

    from mcpfleet.cli.app import command

    if isinstance(exc, typer.Exit):
        sys.exit(exc.exit_code)
    show = getattr(exc, "show", None)
    if not isinstance(exc, typer.exceptions.TyperException) or show is None:
        raise exc
    cli = command()
    ctx = cli.context_class(cli, info_name="mcpfleet")
    for name in path:
        sub = ctx.command.commands[name]
        ctx = sub.context_class(sub, info_name=name, parent=ctx)
    usage: Any = exc  # (a click UsageError has a context: what click's invoke adds to one it passes on)
    if getattr(usage, "ctx", False) is None:
        usage.ctx, usage.cmd = ctx, ctx.command
    show()
    sys.exit(getattr(exc, "exit_code", 1))


def fast(argv: list[str]) -> bool:
    """Run a service command from `argv` without typer; False: not a case for the fast path."""
    path = next((p for p in FAST if tuple(argv[: len(p)]) == p), None)
    if path is None:
        return False
    from mcpfleet.cli.options import parse

    module, name, command_line = FAST[path]

    func = getattr(importlib.import_module(module), name)
    parsed = parse(func, argv[len(path) :], command_line=command_line)
    if parsed is None:
        return False
    rest, params = parsed
    try:
        if command_line:
            func(rest, **params)
        else:
            func(**params)
    except KeyboardInterrupt:  # as click's standalone mode
        print("\nAborted!", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:
        if "typer" not in sys.modules:  # typer errors are made by importing typer
            raise
        _report(path, exc)
    return True


def main() -> None:
    if not fast(sys.argv[1:]):
        command()()


def __getattr__(name: str) -> Any:
    """`app`, the full CLI's typer app, for tests and scripts (typer loads on first use)."""
    if name == "app":
        return getattr(importlib.import_module("mcpfleet.cli.app"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command() -> Any:
    """The full `mcpfleet` click command (cli/app.py)."""
    from mcpfleet.cli.app import command as full

    return full()


if __name__ == "__main__":
    main()
