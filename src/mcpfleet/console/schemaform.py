"""A tool's JSON schema turned into form fields, and the submitted form turned back into arguments.

Top-level properties become fields: strings (an `enum` becomes a choice), numbers, integers and
booleans get their own input; anything else (objects, arrays, unions) is a JSON text box. The
schema comes from a server and is untrusted: names, titles and descriptions are plain text the
templates escape; at most `MAX_FIELDS` properties are shown; a schema that is not an object gives one
JSON box for the whole arguments object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcpfleet.console.live import cut

MAX_FIELDS = 100
FIELD_PREFIX = "arg."
WHOLE = "arguments"
"""The form field holding the whole arguments object when the schema has no usable properties."""
MAX_JSON_DEPTH = 64


class ArgumentError(ValueError):
    """A submitted value that does not fit its field; the message names the field."""


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    """string, number, integer, boolean, choice or json"""
    required: bool
    description: str
    default: str
    choices: tuple[str, ...] = ()

    @property
    def form_name(self) -> str:
        return FIELD_PREFIX + self.name


def _kind(spec: dict[str, Any]) -> str:
    if isinstance(spec.get("enum"), list) and all(isinstance(c, str) for c in spec["enum"]):
        return "choice"
    kind = spec.get("type")
    if kind in ("string", "number", "integer", "boolean"):
        return str(kind)
    return "json"


def _default(spec: dict[str, Any], kind: str) -> str:
    if "default" not in spec:
        return ""
    value = spec["default"]
    if kind == "json":
        return cut(json.dumps(value, default=str), 2000)
    if kind == "boolean":
        return "true" if value is True else ""
    return cut(value if isinstance(value, str) else json.dumps(value, default=str), 2000)


def fields(schema: dict[str, Any]) -> list[Field]:
    """The form of `schema`; an empty list means one JSON box (`WHOLE`), unless it takes no input."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required: list[Any] = schema["required"] if isinstance(schema.get("required"), list) else []
    out: list[Field] = []
    for name, spec in list(properties.items())[:MAX_FIELDS]:
        if not isinstance(name, str) or not isinstance(spec, dict):
            continue
        kind = _kind(spec)
        out.append(
            Field(
                name=name,
                kind=kind,
                required=name in required,
                description=cut(spec.get("description") or spec.get("title") or "", 2000),
                default=_default(spec, kind),
                choices=tuple(cut(c, 200) for c in spec["enum"][:MAX_FIELDS]) if kind == "choice" else (),
            )
        )
    return out


def takes_no_input(schema: dict[str, Any]) -> bool:
    properties = schema.get("properties")
    return isinstance(properties, dict) and not properties


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_JSON_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _json(name: str, text: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ArgumentError(f"{name}: not valid JSON ({str(exc)[:200]})") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise ArgumentError(f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _value(field: Field, text: str) -> Any:
    if field.kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise ArgumentError(f"{field.name}: expected an integer, got {cut(text, 60)!r}") from None
    if field.kind == "number":
        try:
            number = float(text.strip())
        except ValueError:
            raise ArgumentError(f"{field.name}: expected a number, got {cut(text, 60)!r}") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ArgumentError(f"{field.name}: expected a finite number")
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    if field.kind == "choice" and text not in field.choices:
        raise ArgumentError(f"{field.name}: expected one of the listed choices")
    if field.kind == "json":
        return _json(field.name, text)
    return text


def arguments(schema: dict[str, Any], form: dict[str, str]) -> dict[str, Any]:
    """The tool call's arguments from the submitted form (`form`: field name -> value)."""
    shown = fields(schema)
    if not shown:
        if takes_no_input(schema):
            return {}
        text = form.get(WHOLE, "").strip() or "{}"
        value = _json(WHOLE, text)
        if not isinstance(value, dict):
            raise ArgumentError(f"{WHOLE}: expected a JSON object")
        return value
    out: dict[str, Any] = {}
    for field in shown:
        if field.kind == "boolean":
            checked = form.get(field.form_name) == "true"
            if checked or field.required:
                out[field.name] = checked
            continue
        text = form.get(field.form_name, "")
        if text == "":
            if field.required:
                raise ArgumentError(f"{field.name}: required")
            continue
        out[field.name] = _value(field, text)
    return out
