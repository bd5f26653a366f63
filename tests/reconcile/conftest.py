"""Helpers for the reconcile rule tests: build objects from YAML snippets."""

from __future__ import annotations

from typing import Any

import yaml

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.resource import Resource


def obj(text: str, namespace: str = "team") -> Any:
    document = yaml.safe_load(text)
    document.setdefault("apiVersion", "mcpfleet.dev/v1alpha1")
    document.setdefault("metadata", {}).setdefault("namespace", namespace)
    resource: Resource = parse_manifest(document)
    return resource
