"""The catalogue page's work: search the catalogues, one entry's inputs, and "add to fleet".

Searching is `mcpfleet search`'s (`catalogue.sources.gather`: the fleet's running registries, the
person's registries file, the bundled catalogue); adding is `mcpfleet add`'s (`catalogue.manifest.
plan_add` then `catalogue.fleet.write`, into the folder the fleet's `up` runs), so the console writes
exactly the manifest and Secret files the command would, and refuses what it refuses, naming the
field. On Kubernetes the console creates nothing (its account is read-only, and it must not act
with more rights than its visitor): "add to fleet" shows the manifest `mcpfleet add` would write, with
the namespace set, to apply with the visitor's own rights, and the names (never the values) of the
Secret keys it refers to. Entries are untrusted (the same validation as the command); the page
escapes what it shows.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.catalogue.entries import CatalogueEntry, find
from mcpfleet.catalogue.fleet import manifest_text, write
from mcpfleet.catalogue.manifest import AddError, AddPlan, Inputs, plan_add
from mcpfleet.catalogue.sources import gather
from mcpfleet.platform.local.paths import PathEscapeError

MAX_RESULTS = 200
OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Input:
    """A value the entry asks for: `env.NAME` or `arg.NAME` in the add form."""

    form_name: str
    label: str
    description: str
    required: bool
    secret: bool
    default: str


async def search(
    term: str, state_dir: Path | None, registries: list[str] | None = None
) -> tuple[list[CatalogueEntry], list[str]]:
    """`mcpfleet search`: the local fleet's registries (state_dir) or `registries` (a cluster's)."""
    found = await asyncio.to_thread(gather, term, list(registries or []), [], state_dir)
    from mcpfleet.catalogue.entries import search as ranked

    return ranked(found.entries, term)[:MAX_RESULTS], found.problems


async def lookup(
    name: str, state_dir: Path | None, registries: list[str] | None = None
) -> CatalogueEntry | None:
    term = name.rsplit("/", 1)[-1]
    entries, _ = await search(term, state_dir, registries)
    try:
        return find(entries, name, None)
    except LookupError:
        return None


def inputs(entry: CatalogueEntry) -> list[Input]:
    """The values the first package asks for (what `mcpfleet add` would prompt for)."""
    out: list[Input] = []
    for package in entry.packages()[:1]:
        for arg in package.get("packageArguments") or []:
            if not isinstance(arg, dict) or arg.get("value") is not None:
                continue
            label = str(arg.get("name") or arg.get("valueHint") or "").lstrip("-")
            if label:
                out.append(_input("arg." + label, label, arg))
        for env in package.get("environmentVariables") or []:
            if isinstance(env, dict) and env.get("name") and env.get("value") is None:
                out.append(_input("env." + str(env["name"]), str(env["name"]), env))
    return out[:50]


def _input(form_name: str, label: str, spec: dict[str, Any]) -> Input:
    return Input(
        form_name=form_name[:200],
        label=label[:200],
        description=str(spec.get("description") or "")[:2000],
        required=bool(spec.get("isRequired")),
        secret=bool(spec.get("isSecret")),
        default="" if spec.get("default") is None else str(spec.get("default"))[:500],
    )


def add(
    entry: CatalogueEntry,
    object_name: str,
    form: dict[str, str],
    folder: Path,
    state_dir: Path,
    group: str | None = None,
) -> Path:
    """`mcpfleet add` for the form's values: the manifest written. AddError names the field."""
    plan = plan_for(entry, object_name, form, group)
    try:
        return write(plan, folder, state_dir, force=False)[0]
    except PathEscapeError as exc:
        raise AddError("name", str(exc)) from None


def plan_for(entry: CatalogueEntry, object_name: str, form: dict[str, str], group: str | None) -> AddPlan:
    """What `mcpfleet add` plans for the form's values (nothing written). AddError names the field."""
    if not OBJECT_NAME.match(object_name):
        raise AddError("name", "expected a DNS label: lower case letters, digits and '-', at most 63")
    env = {k.removeprefix("env."): v for k, v in form.items() if k.startswith("env.") and v != ""}
    args = {k.removeprefix("arg."): [v] for k, v in form.items() if k.startswith("arg.") and v != ""}
    return plan_add(entry, object_name, Inputs(env=env, args=args), group=group, remote=False)


@dataclass(frozen=True)
class ClusterManifest:
    """ "Add to fleet" on a cluster: the manifest to apply and the Secret it needs (key names only)."""

    text: str
    secret_name: str
    secret_keys: list[str]


def for_cluster(plan: AddPlan, namespace: str) -> ClusterManifest:
    plan.manifest["metadata"]["namespace"] = namespace
    return ClusterManifest(manifest_text(plan), plan.secret_name, sorted(plan.secrets))
