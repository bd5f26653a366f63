"""The registry server's own OpenAPI document, built from the shipped upstream `openapi.yaml`.

It keeps the upstream read operations verbatim (schemas included), serves them under `/v0.1` and
`/v0`, and adds what this server does beyond them or where the official registry's implementation
differs from the document: the problem+json 400 / 404 / 422 answers (as the official registry sends
them), the 304 answer, the bounds of `limit` and `search`, the `search_fields` extension, and the
operational endpoints. The write operations (publish, the two status updates, delete, and the
optional update, which only a moderator's `edit` grant may use) keep the upstream request and
success schemas; their error answers are this server's problem+json ones (`registry.publish`),
including 405 on a registry with publishing off. Because the upstream schemas are reused as they are, a client (or schemathesis)
checking responses against this document checks them against the upstream API.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any

import yaml

from mcpfleet import __version__

_READ_PATHS = (
    "/v0.1/servers",
    "/v0.1/servers/{serverName}/versions",
    "/v0.1/servers/{serverName}/versions/{version}",
)
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "status", "detail"],
    "properties": {
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["message", "location"],
                "properties": {"message": {"type": "string"}, "location": {"type": "string"}, "value": {}},
            },
        },
    },
}
_SEARCH_FIELDS_PARAM = {
    "name": "search_fields",
    "in": "query",
    "required": False,
    "description": (
        "mcpfleet extension: what `search` matches, a comma-separated subset of name, title, description "
        "that includes name. Default `name` (the official registry's behaviour)."
    ),
    "schema": {"type": "string", "default": "name", "example": "name,title,description"},
}


@functools.cache
def upstream_openapi() -> dict[str, Any]:
    """The shipped copy of the upstream registry OpenAPI document (read once per process)."""
    text = resources.files("mcpfleet.registry.schemas").joinpath("openapi.yaml").read_text()
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/problem+json": {"schema": PROBLEM_SCHEMA}}}


_WRITES: dict[tuple[str, str], tuple[str, dict[str, str]]] = {
    # (upstream path, method): (operationId, {status: what this server answers it for})
    ("/v0.1/publish", "post"): (
        "publish",
        {
            "400": "The body is not JSON, or this version was already published (versions are immutable)",
            "409": "A synced source serves this name and ranks above published entries",
            "413": "The body is larger than publish.maxBodyBytes",
            "415": "The body is not JSON (Content-Type)",
            "422": (
                "The body is not a valid server.json, breaks a publish rule (docs/registry.md, "
                '"Publish validation") or holds an integer beyond 64 bits; `errors` names the field'
            ),
        },
    ),
    ("/v0.1/servers/{serverName}/versions/{version}/status", "patch"): (
        "update_server_version_status",
        {
            "400": "The body is not JSON, or the status is already the one asked for",
            "404": "Server version not found",
            "409": "The version comes from a synced source: its status is changed there",
            "413": "The body is larger than publish.maxBodyBytes",
            "415": "The body is not JSON (Content-Type)",
            "422": "Not {status, statusMessage?} with a known status, or a statusMessage with status active",
        },
    ),
    ("/v0.1/servers/{serverName}/status", "patch"): (
        "update_server_status",
        {
            "400": "The body is not JSON",
            "404": "Server not found",
            "409": "The server comes from a synced source: its status is changed there",
            "413": "The body is larger than publish.maxBodyBytes",
            "415": "The body is not JSON (Content-Type)",
            "422": "Not {status, statusMessage?} with a known status",
        },
    ),
    ("/v0.1/servers/{serverName}/versions/{version}", "put"): (
        "update_server_version",
        {
            "400": "The body is not JSON",
            "403": "The token has no edit grant for this server: versions are immutable for publishers",
            "404": "Server version not found (never published)",
            "409": "The version comes from a synced source: it is edited there",
            "413": "The body is larger than publish.maxBodyBytes",
            "415": "The body is not JSON (Content-Type)",
            "422": "Not a valid server.json, a publish rule broken, or another name or version than the path's",
        },
    ),
    ("/v0.1/servers/{serverName}/versions/{version}", "delete"): (
        "delete_server_version",
        {
            "404": "Server version not found",
            "409": "The version comes from a synced source: it is removed there",
        },
    ),
}
_WRITE_COMMON = {
    "401": "No token, or not one of the configured issuer and audience (`WWW-Authenticate` says why)",
    "403": "The token lacks the publish scope, or its grants do not cover this server name",
    "405": "Publishing is not enabled on this registry (no publish block in its config)",
    "503": "The registry's store did not open (the server is stopping): publishing is unavailable",
}


def _write_operations(upstream: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The upstream write operations as this server answers them, by upstream path and method."""
    out: dict[str, dict[str, Any]] = {}
    for (path, method), (operation_id, errors) in _WRITES.items():
        operation = copy.deepcopy(upstream["paths"][path][method])
        success = operation["responses"]["200"]
        operation["responses"] = {"200": success} | {
            status: _problem(text) for status, text in sorted({**_WRITE_COMMON, **errors}.items())
        }
        operation["operationId"] = operation_id
        out.setdefault(path, {})[method] = operation
    return out


def _add_writes(paths: dict[str, Any], upstream: dict[str, Any]) -> None:
    for path, operations in _write_operations(upstream).items():
        for prefix in ("/v0.1", "/v0"):
            for method, operation in operations.items():
                op = copy.deepcopy(operation)
                op["operationId"] = ("v0_1_" if prefix == "/v0.1" else "v0_") + operation["operationId"]
                paths.setdefault(prefix + path.removeprefix("/v0.1"), {})[method] = op


def _validate_operation(upstream: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`POST /v0.1/validate`: the publish dry run (`registry.publishcheck.validate`)."""
    request = copy.deepcopy(upstream["paths"]["/v0.1/publish"]["post"]["requestBody"])
    valid = {
        "type": "object",
        "required": ["valid", "name", "version"],
        "properties": {"valid": {"const": True}, "name": {"type": "string"}, "version": {"type": "string"}},
    }
    errors = {
        "400": "The body is not JSON",
        "405": "Only POST",
        "413": "The body is larger than publish.maxBodyBytes",
        "415": "The body is not JSON (Content-Type)",
        "422": "What a publish of this body would be refused for; `errors` names the field",
    }
    return {
        "operationId": ("v0_1_" if prefix == "/v0.1" else "v0_") + "validate_server",
        "description": (
            "Dry run of a publish: the same checks (schema and publish rules), nothing stored, no token. "
            "Namespace grants and duplicate versions are checked by the publish itself."
        ),
        "requestBody": request,
        "responses": {"200": _json("The document would be accepted", valid)}
        | {status: _problem(text) for status, text in errors.items()},
    }


_TOKEN_RESPONSE = {
    "type": "object",
    "required": ["registry_token", "expires_at"],
    "properties": {
        "registry_token": {"type": "string", "description": "An EdDSA JWT signed by this registry"},
        "expires_at": {"type": "integer", "description": "Unix seconds (five minutes after issue)"},
    },
}


def _exchange_operation(login: str, prefix: str) -> dict[str, Any]:
    """`POST /v0.1/auth/{oidc,none}`: the official registry's token exchange (`registry/publish.py`)."""
    errors = {"404": "This login is not enabled on this registry", "405": "Only POST"}
    operation: dict[str, Any] = {
        "operationId": ("v0_1_" if prefix == "/v0.1" else "v0_") + f"auth_{login}",
        "tags": ["auth"],
    }
    if login == "oidc":
        operation["description"] = (
            "Exchange an ID token of the configured issuer (publish.auth) for a short-lived registry "
            "token carrying the namespaces publish.grants map its claims to"
        )
        operation["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["oidc_token"],
                        "additionalProperties": False,
                        "properties": {"oidc_token": {"type": "string", "minLength": 1}},
                    }
                }
            },
        }
        errors |= {
            "400": "The body is not JSON",
            "401": "The ID token is not a valid token of the issuer for this audience",
            "403": "No grant matches the token's claims",
            "413": "The body is larger than 64 KiB",
            "415": "The body is not JSON (Content-Type)",
            "422": "oidc_token missing, not a string, or an unknown field",
        }
    else:
        operation["description"] = (
            "Development only (publish.anonymousLogin): a registry token that may publish and edit "
            "io.modelcontextprotocol.anonymous/*"
        )
    operation["responses"] = {"200": _json("A registry token", _TOKEN_RESPONSE)} | {
        status: _problem(text) for status, text in sorted(errors.items())
    }
    return operation


def _read_parameters(parameters: list[dict[str, Any]]) -> None:
    """The upstream read parameters as this server reads them."""
    for param in parameters:
        if param["in"] == "query":
            param["allowEmptyValue"] = True  # `limit=` is no value (200), as on the official
        if param["name"] == "limit":
            param["schema"] = {"type": "integer", "minimum": 1, "maximum": 100, "default": 30}
        if param["name"] == "search":
            param["schema"] = {**param["schema"], "minLength": 3}
        if param["name"] == "updated_since":
            param["description"] += (
                " An invalid timestamp is answered with 400, and so is include_deleted=false with it."
            )


def _add_reads(paths: dict[str, Any], upstream: dict[str, Any]) -> None:
    """The upstream read operations under /v0.1 and /v0, with ETag, 304 and the problem answers."""
    etag_header = {"ETag": {"description": "Entity tag of the representation", "schema": {"type": "string"}}}
    for path in _READ_PATHS:
        operation = copy.deepcopy(upstream["paths"][path]["get"])
        responses = operation["responses"]
        responses["200"]["headers"] = etag_header
        responses["304"] = {
            "description": "Not modified (If-None-Match matched the ETag)",
            "headers": etag_header,
        }
        responses["400"] = _problem(
            "Invalid updated_since, updated_since with include_deleted=false, or a NUL (%00) in the query"
        )
        responses["422"] = _problem("A parameter fails its schema; `errors` lists each one")
        if "404" in responses:
            responses["404"] = _problem(responses["404"]["description"])
        _read_parameters(operation["parameters"])
        if path == _READ_PATHS[0]:
            operation["parameters"].append({**copy.deepcopy(_SEARCH_FIELDS_PARAM), "allowEmptyValue": True})
        for prefix in ("/v0.1", "/v0"):
            op = copy.deepcopy(operation)
            op["operationId"] = ("v0_1_" if prefix == "/v0.1" else "v0_") + {
                _READ_PATHS[0]: "list_servers",
                _READ_PATHS[1]: "list_server_versions",
                _READ_PATHS[2]: "get_server_version",
            }[path]
            paths[prefix + path.removeprefix("/v0.1")] = {"get": op}


def _add_service_paths(paths: dict[str, Any]) -> None:
    """Health (at the root and under each API prefix) and the official registry's version body."""
    status_schema = {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"type": "string"}},
    }
    for prefix in ("", "/v0.1", "/v0"):
        paths[f"{prefix}/health"] = {
            "get": {
                "operationId": "health" + prefix.replace("/", "_").replace(".", "_"),
                "responses": {"200": _json("Alive", status_schema)},
            }
        }
    for prefix in ("/v0.1", "/v0"):
        paths[f"{prefix}/version"] = {
            "get": {
                "operationId": "version" + prefix.replace("/", "_").replace(".", "_"),
                "description": "The official registry's version body.",
                "responses": {
                    "200": _json(
                        "Server version",
                        {
                            "type": "object",
                            "required": ["version", "git_commit", "build_time"],
                            "properties": {
                                "version": {"type": "string"},
                                "git_commit": {"type": "string"},
                                "build_time": {"type": "string"},
                            },
                        },
                    )
                },
            }
        }


def _add_operations_paths(paths: dict[str, Any]) -> None:
    """Readiness, the server's version, sync status and metrics."""
    failing = {
        "type": "object",
        "required": ["name", "lastError"],
        "properties": {"name": {"type": "string"}, "lastError": {"type": "string"}},
    }
    readiness_schema = {
        "type": "object",
        "required": ["status"],
        "properties": {"status": {"type": "string"}, "failingSources": {"type": "array", "items": failing}},
    }
    paths["/readiness"] = {
        "get": {
            "operationId": "readiness",
            "description": "200 once every source has synced successfully at least once, else 503."
            " Sources whose latest sync failed (serving their last good data, if any) are listed"
            " under failingSources.",
            "responses": {
                "200": _json("Ready", readiness_schema),
                "503": _json("Not ready yet", readiness_schema),
            },
        }
    }
    paths["/version"] = {
        "get": {
            "operationId": "version",
            "responses": {
                "200": _json(
                    "Server version",
                    {
                        "type": "object",
                        "required": ["version"],
                        "properties": {"version": {"type": "string"}},
                    },
                )
            },
        }
    }
    paths["/status"] = {
        "get": {
            "operationId": "sync_status",
            "description": "Per-source sync state: last attempt, last success, last error, rejected entries.",
            "responses": {
                "200": _json(
                    "Sync status",
                    {
                        "type": "object",
                        "required": ["ready", "sources"],
                        "properties": {"ready": {"type": "boolean"}, "sources": {"type": "array"}},
                    },
                )
            },
        }
    }
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "responses": {
                "200": {
                    "description": "Prometheus metrics",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }


def build_openapi() -> dict[str, Any]:
    upstream = upstream_openapi()
    paths: dict[str, Any] = {}
    _add_reads(paths, upstream)
    _add_writes(paths, upstream)
    for prefix in ("/v0.1", "/v0"):
        paths[f"{prefix}/validate"] = {"post": _validate_operation(upstream, prefix)}
        for login in ("oidc", "none"):
            paths[f"{prefix}/auth/{login}"] = {"post": _exchange_operation(login, prefix)}
    _add_service_paths(paths)
    _add_operations_paths(paths)
    return {
        "openapi": upstream["openapi"],
        "jsonSchemaDialect": upstream.get("jsonSchemaDialect"),
        "info": {
            "title": "mcpfleet registry server",
            "version": __version__,
            "description": "The MCP Server Registry API "
            + upstream["info"]["version"]
            + ": reads, and the publish / status / delete operations when publishing is enabled.",
            "license": upstream["info"]["license"],
        },
        "paths": paths,
        "components": {
            "schemas": copy.deepcopy(upstream["components"]["schemas"]),
            "securitySchemes": copy.deepcopy(upstream["components"].get("securitySchemes", {})),
        },
    }
