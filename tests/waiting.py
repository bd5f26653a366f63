"""One way for the tests to wait for something that happens in another process or task: `wait_until`.

Polls a check until it returns a truthy value and returns that value; on time-out fails with what was
awaited, the last value seen (or the last tolerated error) and, when given, more context (a log
tail). Tests use it instead of their own deadline loops, so every wait reports the same way.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def wait_until(
    check: Callable[[], Awaitable[T | None]],
    what: str,
    *,
    within: float = ...,
    interval: float = ...,
    tolerate: tuple[type[BaseException], ...] = ...,
    context: Callable[[], Awaitable[str] | str] | None = ...,
) -> T: ...


@overload
async def wait_until(
    check: Callable[[], T | None],
    what: str,
    *,
    within: float = ...,
    interval: float = ...,
    tolerate: tuple[type[BaseException], ...] = ...,
    context: Callable[[], Awaitable[str] | str] | None = ...,
) -> T: ...


async def wait_until(
    check: Callable[[], Any],
    what: str,
    *,
    within: float = 20.0,
    interval: float = 0.1,
    tolerate: tuple[type[BaseException], ...] = (),
    context: Callable[[], Awaitable[str] | str] | None = None,
) -> Any:
    """Call `check` (sync or async) every `interval` seconds until its result is truthy; return it.

    An exception of a `tolerate` type counts as "not yet" (e.g. a server still starting); any other
    exception, including an AssertionError the check raises to give up early, propagates. After
    `within` seconds, AssertionError naming `what`, the last result or error and `context()` (sync
    or async: e.g. a log tail or the status the test was waiting on).
    """
    deadline = time.monotonic() + within
    last: Any = None
    while True:
        try:
            result = check()
            value = await result if inspect.isawaitable(result) else result
        except tolerate as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(interval)
    message = f"timed out after {within:g}s waiting for {what}; last: {last!r}"
    if context is not None:
        extra = context()
        message += "\n" + (await extra if inspect.isawaitable(extra) else extra)
    raise AssertionError(message)
