"""The events timeline of the fleet and object pages: what happened to which object, newest first.

On Kubernetes the entries are the API's Events about the fleet's objects (what the operator and the
controllers recorded: reasons, messages, repeat counts). A local fleet records no events, so its
timeline is built from what `up` keeps: every condition's last transition (type, status, reason,
message) of every object. Both are untrusted text (an Event's message may quote a server's stderr)
and bounded: at most `MAX_EVENTS` entries, each message cut at `MESSAGE_CHARS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcpfleet.platform.local.display import age

MAX_EVENTS = 50
MESSAGE_CHARS = 2000


@dataclass(frozen=True)
class Event:
    """One timeline entry; `warning` marks a Kubernetes Warning event or a condition that is not met."""

    time: str
    kind: str
    name: str
    reason: str
    message: str
    warning: bool
    count: int = 1

    @property
    def ago(self) -> str:
        return age(self.time) if self.time else ""


def _cut(text: Any) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= MESSAGE_CHARS else value[:MESSAGE_CHARS] + "…"


def _mapping(value: Any) -> dict[str, Any]:
    """A field the API should answer as an object: anything else (a hostile answer) is empty."""
    return value if isinstance(value, dict) else {}


def newest_first(events: Iterable[Event]) -> list[Event]:
    return sorted(events, key=lambda e: e.time, reverse=True)[:MAX_EVENTS]


def from_conditions(kind: str, name: str, status: dict[str, Any]) -> list[Event]:
    """A local object's timeline: one entry per condition, at its last transition."""
    out: list[Event] = []
    for condition in status.get("conditions") or []:
        if not isinstance(condition, dict) or not condition.get("lastTransitionTime"):
            continue
        kind_of = str(condition.get("type") or "?")
        met = str(condition.get("status") or "")
        out.append(
            Event(
                time=str(condition["lastTransitionTime"]),
                kind=kind,
                name=name,
                reason=_cut(
                    f"{kind_of}={met}" + (f" ({condition['reason']})" if condition.get("reason") else "")
                ),
                message=_cut(condition.get("message")),
                warning=met == "False" and kind_of == "Ready",
            )
        )
    return out


def from_kubernetes(event: dict[str, Any]) -> Event:
    """An Event of the core/v1 API (a dict as the API answers it)."""
    involved = _mapping(event.get("involvedObject"))
    time = (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or _mapping(event.get("metadata")).get("creationTimestamp")
        or ""
    )
    count = event.get("count")
    time = str(time)[:40]
    if "." in time:  # eventTime has microseconds: the seconds are enough for the page
        time = time.split(".", 1)[0] + "Z"
    return Event(
        time=time,
        kind=_cut(involved.get("kind"))[:100],
        name=_cut(involved.get("name"))[:253],
        reason=_cut(event.get("reason"))[:200],
        message=_cut(event.get("message")),
        warning=event.get("type") == "Warning",
        count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1,
    )
