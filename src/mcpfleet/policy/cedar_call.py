"""One Cedar decision, called as directly as cedarpy allows; the public wrapper when that fails.

`cedarpy.is_authorized` is a Python wrapper around the extension's `is_authorized_batch`: it
copies the request, reads the answer with the stdlib's `json`, wraps it in `AuthzResult` /
`Diagnostics` objects and an `Enum` — about a third of a decision's CPU when the entities are
pre-parsed. `decide` calls the extension function the wrapper calls, with the request in the form
the wrapper hands over (context as JSON text, the `Entities` handle's inner object), and reads
only `decision`, `diagnostics.reason` and `diagnostics.errors`, with orjson.

The extension module is not cedarpy's public API, so it is used only after a check at first use
that it answers permit, forbid and error cases exactly as `cedarpy.is_authorized` does; anything
unexpected (a renamed function, another answer shape) keeps the public wrapper for the life of the
process. `tests/policy/test_cedar_equivalence.py` compares every decision with the public API.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import cedarpy
import orjson

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    allowed: bool
    reasons: list[Any]
    """The determining policy ids."""
    errors: list[Any]
    """Evaluation errors (policies that errored and so did not apply)."""


def _public(request: dict[str, Any], policies: cedarpy.PolicySet, entities: cedarpy.Entities) -> Answer:
    result = cedarpy.is_authorized(request, policies, entities)
    diagnostics = result.diagnostics
    return Answer(result.allowed, list(diagnostics.reasons), list(diagnostics.errors))


def _direct(request: dict[str, Any], policies: cedarpy.PolicySet, entities: cedarpy.Entities) -> Answer:
    (text,) = cedarpy._internal.is_authorized_batch([request], policies, entities._inner, None, False)
    answer = orjson.loads(text)
    diagnostics = answer.get("diagnostics") or {}
    return Answer(
        answer["decision"] == "Allow",
        list(diagnostics.get("reason") or ()),
        list(diagnostics.get("errors") or ()),
    )


def _direct_agrees() -> bool:
    """Does the extension call answer as the public API on a permit, a forbid and an error?"""
    policies = cedarpy.PolicySet.from_str(
        "permit(principal, action, resource) when { context.n > 1 };\n"
        'forbid(principal == U::"f", action, resource);'
    )
    entities = cedarpy.Entities.from_json_str(
        '[{"uid": {"type": "U", "id": "a"}, "attrs": {}, "parents": []}]'
    )
    cases: list[tuple[str, str | None]] = [
        ("a", '{"n": 2}'),  # permitted
        ("f", '{"n": 2}'),  # forbidden
        ("a", "{}"),  # the condition errors: not permitted, error reported
        ("a", '{"n": 0}'),  # no policy permits
        ("a", None),  # no context (empty): errors as "{}" does
    ]
    try:
        for principal, context in cases:
            request: dict[str, Any] = {
                "principal": {"type": "U", "id": principal},
                "action": {"type": "Action", "id": "x"},
                "resource": {"type": "R", "id": "r"},
            }
            if context is not None:
                request["context"] = context
            direct, public = _direct(request, policies, entities), _public(request, policies, entities)
            if direct != public:
                raise ValueError(f"{principal} {context}: {direct} != {public}")
    except Exception as exc:  # anything unexpected (renamed, another shape): keep the public API
        log.warning("cedarpy's extension call is not as expected (%s); using cedarpy.is_authorized", exc)
        return False
    return True


_decide: Any = None


def decide(request: dict[str, Any], policies: cedarpy.PolicySet, entities: cedarpy.Entities) -> Answer:
    """Cedar's answer to `request` (context as JSON text); raises ValueError as cedarpy does."""
    global _decide
    if _decide is None:
        _decide = _direct if _direct_agrees() else _public
    answer: Answer = _decide(request, policies, entities)
    return answer
