"""Validators for responses: the upstream OpenAPI components and the upstream server.json schema."""

from __future__ import annotations

import functools
import json
from typing import Any

import yaml
from jsonschema import Draft7Validator, Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.reference import OPENAPI_FILE, SERVER_SCHEMA_FILE

_OPENAPI_URI = "urn:mcp-registry-openapi"


@functools.cache
def _registry() -> Registry:
    doc = yaml.safe_load(OPENAPI_FILE.read_text())
    return Registry().with_resource(
        _OPENAPI_URI, Resource.from_contents(doc, default_specification=DRAFT202012)
    )


@functools.cache
def component(name: str) -> Draft202012Validator:
    schema = {"$ref": f"{_OPENAPI_URI}#/components/schemas/{name}"}
    return Draft202012Validator(schema, registry=_registry(), format_checker=FormatChecker())


@functools.cache
def server_schema() -> Draft7Validator:
    return Draft7Validator(json.loads(SERVER_SCHEMA_FILE.read_text()), format_checker=FormatChecker())


def _check(validator: Any, doc: Any, what: str) -> None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"{what}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def check_server_list(doc: Any) -> None:
    _check(component("ServerList"), doc, "ServerList")
    for item in doc["servers"]:
        _check(server_schema(), item["server"], f"server.json of {item['server'].get('name')}")


def check_server_response(doc: Any) -> None:
    _check(component("ServerResponse"), doc, "ServerResponse")
    _check(server_schema(), doc["server"], "server.json")
