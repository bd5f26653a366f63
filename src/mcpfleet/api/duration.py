"""Durations: the one `Duration` type of every model (resources and data-plane config files).

A duration is a Go-style string ("30s", "1m30s", "250ms", "2000000us"), the form Kubernetes users
write and CEL's `duration()` parses. The CRD pattern, the local validation and the services that read
the value (`parse_duration`) accept exactly the same strings, because they all come from here.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

_UNIT = r"(ns|us|µs|ms|s|m|h)"
DURATION_PATTERN = rf"^([0-9]+(\.[0-9]+)?{_UNIT})+$"
DURATION_MAX_LENGTH = 64
"""Bounds the string (and the cost of CEL's `duration()` on it)."""

_PART = re.compile(rf"([0-9]+(?:\.[0-9]+)?){_UNIT}")
_WHOLE = re.compile(DURATION_PATTERN)
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str) -> float:
    """Seconds in a Go-style duration such as `30s`, `1h30m` or `250ms`; ValueError otherwise."""
    if len(value) > DURATION_MAX_LENGTH or not _WHOLE.match(value):
        raise ValueError(f"invalid duration {value!r} (expected e.g. 30s, 5m, 1h30m, 250ms)")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PART.findall(value))


def _checked(value: str) -> str:
    parse_duration(value)  # the same test as the pattern, with a message people can act on
    return value


Duration = Annotated[
    str,
    Field(json_schema_extra={"maxLength": DURATION_MAX_LENGTH, "pattern": DURATION_PATTERN}),
    AfterValidator(_checked),
]
"""A Go-style duration string: the CRD gets the pattern, Python callers read it with `parse_duration`."""
