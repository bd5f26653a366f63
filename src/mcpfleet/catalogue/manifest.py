"""What `mcpfleet add` writes: the manifest of one catalogue entry, and the Secret values it needs.

A package becomes an MCPServer (`npm` → `npx://PKG@VERSION`, `pypi` → `uvx://PKG@VERSION`, `oci` →
the image), a `remotes[]` entry an MCPRemoteProxy. Everything server.json says about running it is
honoured or refused, never dropped: the transport, `packageArguments` (positional and named, fixed
values, `{variables}`, defaults, `choices`, `isRequired`, `isRepeated`), `environmentVariables` and
remote `headers`. Secret values (`isSecret`) go into a local Secret (`STATE/secrets/NAME/KEY`, the
place `mcpfleet up` reads Secret keys from) and the manifest only references them, so the manifest
can be committed and applied unchanged with `kubectl apply` (after creating the Secret there).

An entry is untrusted input: a package name, version or value that could become an option of
`uvx` / `npx` / the server (a leading `-`), or holds whitespace or control characters where a single
token is expected, is refused naming its field; named arguments are always one `--flag=value` token.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcpfleet.api.kindnames import MCP_REMOTE_PROXY, MCP_SERVER, MemberKind
from mcpfleet.catalogue.entries import CatalogueEntry

API_VERSION = "mcpfleet.dev/v1alpha1"
ENTRY_ANNOTATION = "mcpfleet.dev/catalogue-entry"
"""Annotation naming the catalogue entry (name@version) a manifest was written from."""
MAX_VALUE_CHARS = 4096
_NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$")
_PYPI_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_!-]*$")
_IMAGE = re.compile(
    r"^[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9._-]+)*(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$"
)
_FLAG = re.compile(r"^-{1,2}[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_VARIABLE = re.compile(r"\{([A-Za-z0-9_.-]+)\}")
_DEFAULT_BASES = {"npm": "https://registry.npmjs.org", "pypi": "https://pypi.org"}
_SCHEMES = {"npm": "npx://", "pypi": "uvx://"}

Prompt = Callable[[str, dict[str, Any], bool], "str | None"]
"""Asks a person for a value: (field path, the server.json input, is it secret) -> value or None."""


class AddError(ValueError):
    """Why an entry cannot be added; `field` is the server.json path or the flag at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass
class Inputs:
    """Values a person gave: `--env NAME=VALUE`, `--arg NAME=VALUE` (a named argument's flag with
    or without dashes, a positional argument's valueHint, or a `{variable}`; repeat for repeated
    arguments) and `--header NAME=VALUE`."""

    env: dict[str, str] = field(default_factory=dict)
    args: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    prompt: Prompt | None = None


@dataclass
class AddPlan:
    """The manifest to write and the Secret values to store beside it (never in the manifest)."""

    name: str
    kind: MemberKind
    manifest: dict[str, Any]
    secret_name: str
    secrets: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)


def _clean(path: str, value: str, single_token: bool = False) -> str:
    if len(value) > MAX_VALUE_CHARS:
        raise AddError(path, f"longer than {MAX_VALUE_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise AddError(path, "must not hold control characters (newlines, NUL, …)")
    if single_token and (not value or any(c.isspace() for c in value)):
        raise AddError(path, "must be one token without whitespace")
    return value


def _check_format(path: str, spec: dict[str, Any], value: str) -> None:
    choices = spec.get("choices")
    if isinstance(choices, list) and choices and value not in choices:
        raise AddError(path, f"must be one of {', '.join(map(str, choices))}, got {value!r}")
    kind = spec.get("format")
    if kind == "number":
        try:
            float(value)
        except ValueError:
            raise AddError(path, f"must be a number, got {value!r}") from None
    if kind == "boolean" and value not in ("true", "false"):
        raise AddError(path, f"must be true or false, got {value!r}")


class _Resolver:
    """Resolves server.json inputs to values: given, fixed, default, asked, or refused if required."""

    def __init__(self, inputs: Inputs, plan: AddPlan) -> None:
        self.inputs = inputs
        self.plan = plan

    def given(self, keys: list[str]) -> list[str] | None:
        for key in keys:
            for candidate in (key, key.lstrip("-")):
                if candidate in self.inputs.args:
                    self.plan.used.add(candidate)
                    return self.inputs.args[candidate]
        return None

    def value(self, path: str, spec: dict[str, Any], keys: list[str], given: str | None) -> str | None:
        """One value for `spec`, or None when it is optional and nobody set it."""
        secret = bool(spec.get("isSecret"))
        if isinstance(spec.get("value"), str):
            value: str | None = self.substitute(path, spec["value"], spec.get("variables"))
        elif given is not None:
            value = given
        elif isinstance(spec.get("default"), str):
            value = spec["default"]
        elif spec.get("isRequired") and self.inputs.prompt is not None:
            value = self.inputs.prompt(path, spec, secret) or None
        else:
            value = None
        if value is None:
            if spec.get("isRequired"):
                hint = f" (give it with {self.flag_hint(keys)})" if keys else ""
                raise AddError(path, f"required, and no value was given{hint}")
            return None
        _clean(path, value)
        _check_format(path, spec, value)
        return value

    def flag_hint(self, keys: list[str]) -> str:
        return " or ".join(keys)

    def substitute(self, path: str, template: str, variables: Any) -> str:
        """`{name}` in a fixed value replaced by that variable's value (given with --arg name=V)."""
        table = variables if isinstance(variables, dict) else {}

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            spec = table.get(name)
            if not isinstance(spec, dict):
                raise AddError(path, f"uses {{{name}}}, which the entry does not define")
            given = self.given([name])
            value = self.value(
                f"{path}.variables.{name}", spec, [f"--arg {name}=VALUE"], given[0] if given else None
            )
            if value is None:
                raise AddError(f"{path}.variables.{name}", "no value (give it with --arg)")
            return value

        return _VARIABLE.sub(one, template)


def _named(resolver: _Resolver, where: str, spec: dict[str, Any]) -> list[str]:
    flag = str(spec.get("name", ""))
    if not _FLAG.match(flag):
        raise AddError(f"{where}.name", f"{flag!r} is not a command-line flag")
    key = flag.lstrip("-")
    keys = [k for k in (flag, str(spec.get("valueHint") or "")) if k]
    given = resolver.given(keys) or []
    if len(given) > 1 and not spec.get("isRepeated"):
        raise AddError(f"--arg {key}", "given more than once, but the argument is not repeated")
    values: list[str | None] = list(given) or [None]
    resolved = [resolver.value(where, spec, [f"--arg {key}=VALUE"], value) for value in values]
    # One `--flag=value` token each: a value can never become a flag of its own.
    return [f"{flag}={value}" for value in resolved if value is not None]


def _positional(resolver: _Resolver, where: str, spec: dict[str, Any], index: int) -> list[str]:
    hint = str(spec.get("valueHint") or f"arg{index}")
    given = resolver.given([hint]) or []
    if len(given) > 1 and not spec.get("isRepeated"):
        raise AddError(f"--arg {hint}", "given more than once, but the argument is not repeated")
    values: list[str | None] = list(given) or [None]
    argv: list[str] = []
    for value in values:
        resolved = resolver.value(where, spec, [f"--arg {hint}=VALUE"], value)
        if resolved is None:
            continue
        if resolved.startswith("-"):
            raise AddError(
                where,
                f"a positional value must not begin with '-' (it would be read as an option): {resolved!r}",
            )
        argv.append(resolved)
    return argv


def _arguments(resolver: _Resolver, path: str, specs: list[Any]) -> list[str]:
    argv: list[str] = []
    for index, spec in enumerate(specs):
        where = f"{path}[{index}]"
        if not isinstance(spec, dict):
            raise AddError(where, "expected an object")
        if spec.get("isSecret"):
            raise AddError(
                where,
                "a secret command-line argument would be written into the manifest; this entry "
                "cannot be added safely (ask its publisher for an environment variable)",
            )
        if spec.get("type") == "named":
            argv.extend(_named(resolver, where, spec))
        else:
            argv.extend(_positional(resolver, where, spec, index))
    return argv


def _environment(resolver: _Resolver, path: str, specs: list[Any], spec_out: dict[str, Any]) -> None:
    plan = resolver.plan
    env: list[dict[str, str]] = []
    secrets: list[dict[str, str]] = []
    for index, spec in enumerate(specs):
        where = f"{path}[{index}]"
        name = str(spec.get("name", "")) if isinstance(spec, dict) else ""
        if not _ENV_NAME.match(name):
            raise AddError(f"{where}.name", f"{name!r} is not an environment variable name")
        given = resolver.inputs.env.get(name)
        if given is not None:
            plan.used.add(f"env:{name}")
        value = resolver.value(where, spec, [f"--env {name}=VALUE"], given)
        if value is None:
            continue
        if spec.get("isSecret"):
            plan.secrets[name] = value
            secrets.append({"name": plan.secret_name, "key": name, "targetEnvName": name})
        else:
            env.append({"name": name, "value": value})
    if env:
        spec_out["env"] = env
    if secrets:
        spec_out["secrets"] = secrets


def _package_spec(resolver: _Resolver, entry: CatalogueEntry, index: int) -> dict[str, Any]:
    package = entry.packages()[index]
    path = f"packages[{index}]"
    kind = str(package.get("registryType", ""))
    identifier = _clean(f"{path}.identifier", str(package.get("identifier", "")), single_token=True)
    version = str(package.get("version") or "")
    if package.get("runtimeArguments"):
        raise AddError(
            f"{path}.runtimeArguments",
            "arguments for the package runner (uvx / npx / a "
            "container runtime) cannot be expressed in an MCPServer; write the manifest by hand",
        )
    if kind in _SCHEMES:
        pattern = _NPM_NAME if kind == "npm" else _PYPI_NAME
        if not pattern.match(identifier):
            raise AddError(f"{path}.identifier", f"{identifier!r} is not a valid {kind} package name")
        if version and not _VERSION.match(version):
            raise AddError(f"{path}.version", f"{version!r} is not a single version")
        base = str(package.get("registryBaseUrl") or _DEFAULT_BASES[kind]).rstrip("/")
        if base != _DEFAULT_BASES[kind]:
            raise AddError(
                f"{path}.registryBaseUrl",
                f"{base} is not the public {kind} registry, which is the only one uvx / npx are pointed at",
            )
        image = f"{_SCHEMES[kind]}{identifier}" + (f"@{version}" if version else "")
    elif kind == "oci":
        if not _IMAGE.match(identifier):
            raise AddError(f"{path}.identifier", f"{identifier!r} is not a container image reference")
        image = identifier
    else:
        raise AddError(
            f"{path}.registryType", f"{kind!r} packages cannot be run by mcpfleet (npm, pypi and oci can)"
        )
    spec: dict[str, Any] = {"image": image}
    transport = package.get("transport") or {}
    spec["transport"] = str(transport.get("type", "stdio"))
    if spec["transport"] != "stdio":
        url = resolver.substitute(f"{path}.transport.url", str(transport.get("url", "")), None)
        port = urlsplit(url).port if url else None
        if port is None:
            raise AddError(
                f"{path}.transport.url", "an http transport needs a URL with the port the server listens on"
            )
        spec["mcpPort"] = port
    args = _arguments(resolver, f"{path}.packageArguments", list(package.get("packageArguments") or []))
    if args:
        spec["args"] = args
    _environment(
        resolver, f"{path}.environmentVariables", list(package.get("environmentVariables") or []), spec
    )
    return spec


def _remote_spec(resolver: _Resolver, entry: CatalogueEntry, index: int) -> dict[str, Any]:
    remote = entry.remotes()[index]
    path = f"remotes[{index}]"
    url = resolver.substitute(f"{path}.url", str(remote.get("url", "")), remote.get("variables"))
    _clean(f"{path}.url", url, single_token=True)
    if not url.startswith(("https://", "http://")):
        raise AddError(f"{path}.url", "must be an http(s) URL")
    spec: dict[str, Any] = {"remoteURL": url, "transport": str(remote.get("type", "streamable-http"))}
    plain: dict[str, str] = {}
    secret_headers: list[dict[str, Any]] = []
    for h_index, header in enumerate(remote.get("headers") or []):
        where = f"{path}.headers[{h_index}]"
        name = str(header.get("name", "")) if isinstance(header, dict) else ""
        if not _HEADER_NAME.match(name):
            raise AddError(f"{where}.name", f"{name!r} is not a header name")
        given = resolver.inputs.headers.get(name)
        if given is not None:
            resolver.plan.used.add(f"header:{name}")
        value = resolver.value(where, header, [f"--header {name}=VALUE"], given)
        if value is None:
            continue
        if header.get("isSecret"):
            resolver.plan.secrets[name] = value
            secret_headers.append(
                {"headerName": name, "valueSecretRef": {"name": resolver.plan.secret_name, "key": name}}
            )
        else:
            plain[name] = value
    forward: dict[str, Any] = {}
    if plain:
        forward["addPlaintextHeaders"] = plain
    if secret_headers:
        forward["addHeadersFromSecret"] = secret_headers
    if forward:
        spec["headerForward"] = forward
    return spec


def choose(entry: CatalogueEntry, remote: bool) -> tuple[str, int]:
    """Which way of running the entry `add` uses: ("package", i) — a PyPI or npm package first
    (runs on both platforms), then an image — or ("remote", i); `remote` asks for a remote."""
    if not remote:
        kinds = [str(p.get("registryType")) for p in entry.packages()]
        for wanted in ("pypi", "npm", "oci"):
            if wanted in kinds:
                return "package", kinds.index(wanted)
        if kinds:
            return "package", 0
    if entry.remotes():
        return "remote", 0
    raise AddError(
        "remotes" if remote else "packages",
        "the entry offers no " + ("remote" if remote else "package or remote"),
    )


def plan_add(
    entry: CatalogueEntry, name: str, inputs: Inputs, group: str | None = None, remote: bool = False
) -> AddPlan:
    """The manifest (and Secret values) for `entry` under the object name `name`.

    Every value given must be used by the entry: a misspelt `--env` or `--arg` is refused rather
    than silently ignored. The manifest is validated with the same models as `mcpfleet up`."""
    how, index = choose(entry, remote)
    kind: MemberKind = MCP_SERVER if how == "package" else MCP_REMOTE_PROXY
    plan = AddPlan(name=name, kind=kind, manifest={}, secret_name=f"{name}-secrets")
    resolver = _Resolver(inputs, plan)
    spec = _package_spec(resolver, entry, index) if how == "package" else _remote_spec(resolver, entry, index)
    if group:
        spec["groupRef"] = group
    unused = (
        [f"--arg {k}" for k in inputs.args if k not in plan.used]
        + [f"--env {k}" for k in inputs.env if f"env:{k}" not in plan.used]
        + [f"--header {k}" for k in inputs.headers if f"header:{k}" not in plan.used]
    )
    if unused:
        raise AddError(
            unused[0],
            f"{entry.name} has no such {'input' if len(unused) == 1 else 'inputs'}: {', '.join(unused)}",
        )
    plan.manifest = {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "annotations": {ENTRY_ANNOTATION: f"{entry.name}@{entry.version}"}},
        "spec": spec,
    }
    _validate(plan.manifest)
    return plan


def _validate(manifest: dict[str, Any]) -> None:
    from mcpfleet.api.kinds import ManifestError, parse_manifest

    try:
        parse_manifest(manifest)
    except ManifestError as exc:
        raise AddError("manifest", str(exc)) from None
