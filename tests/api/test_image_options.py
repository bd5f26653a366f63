"""Option injection through `image` (issue 27 item 14): `image: "uvx://--version"` ran `uvx --version`.

A package or image name starting with `-` is refused by the model (local validation, naming
`spec.image`) and by the CRD's pattern (what the API server applies); and the command lines built
for packages end the launcher's options (`uvx -- PKG`, `npx -y -- PKG`), which the real uvx and npx
honour: a name after `--` is read as a package, never as an option.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.reconcile.common import package_command
from tests.api.corpus import ROOT

KINDS = ("MCPServer", "EmbeddingServer")
UVX = Path(sys.executable).parent / "uvx"


def _crd_image_pattern(kind: str) -> re.Pattern[str]:
    """The `spec.image` pattern of the generated CRD (RE2 syntax, read by Python's `re` alike)."""
    plural = {"MCPServer": "mcpservers", "EmbeddingServer": "embeddingservers"}[kind]
    crd = yaml.safe_load((ROOT / "deploy" / "crds" / f"{plural}.mcpfleet.dev.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return re.compile(schema["properties"]["spec"]["properties"]["image"]["pattern"])


def _refused_locally(kind: str, image: str) -> str:
    document = {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x"},
        "spec": {"image": image},
    }
    with pytest.raises(ManifestError) as caught:
        parse_manifest(document)
    (found,) = [message for path, message in caught.value.problems if path == "spec.image"]
    return found


OPTION = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="\u2028\u2029\x85"),
    max_size=30,
).map(lambda rest: "-" + rest)


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(KINDS), prefix=st.sampled_from(["uvx://", "npx://", "npx://@", ""]), name=OPTION)
def test_a_leading_dash_is_refused_by_the_model_and_the_crd(kind: str, prefix: str, name: str) -> None:
    image = prefix + name
    message = _refused_locally(kind, image)
    assert "must not start with '-'" in message, message
    assert not _crd_image_pattern(kind).match(image), image


@pytest.mark.parametrize("kind", KINDS)
def test_ordinary_images_still_validate_on_both_sides(kind: str) -> None:
    pattern = _crd_image_pattern(kind)
    for image in (
        "uvx://mcp-server-time",
        "uvx://mcp-server-time@2025.1",
        "npx://@modelcontextprotocol/server-everything@1.2.3",
        "npx://pkg-with-dash",
        "ghcr.io/org/server:1.0",
        "localhost:5000/a/b:tag",
        f"registry.example/x@sha256:{'a' * 64}",
    ):
        assert pattern.match(image), image
        parse_manifest(
            {
                "apiVersion": "mcpfleet.dev/v1alpha1",
                "kind": kind,
                "metadata": {"name": "x"},
                "spec": {"image": image},
            }
        )


PACKAGE = st.from_regex(
    r"(@[a-z0-9][a-z0-9._]{0,8}/)?[a-z0-9][a-z0-9._-]{0,20}(@[0-9a-z.-]{1,10})?", fullmatch=True
)


@settings(max_examples=100, deadline=None)
@given(
    scheme=st.sampled_from(["uvx", "npx"]),
    package=PACKAGE,
    args=st.lists(st.text(max_size=10), max_size=4),
)
def test_package_commands_end_the_launchers_options(scheme: str, package: str, args: list[str]) -> None:
    command = package_command(f"{scheme}://{package}", args)
    assert command[0] == scheme
    marker = command.index("--")
    assert command[marker + 1] == package and list(command[marker + 2 :]) == args
    assert all(a.startswith("-") for a in command[1:marker]), command  # only the launcher's own options


def test_real_launchers_read_a_name_after_double_dash_as_a_package(tmp_path: Path) -> None:
    """What `--` buys, on the real tools: `uvx -- --version` and `npx -y -- --version` try to run a
    package called `--version` (and fail offline) instead of printing their own version."""
    assert UVX.exists(), f"uvx is missing next to the venv's python ({UVX}): run `make venv`"
    npx = shutil.which("npx")
    assert npx, "npx is not installed: run scripts/system-deps.sh (Debian package npm)"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "UV_OFFLINE": "1",
        "NPM_CONFIG_OFFLINE": "true",
        "NPM_CONFIG_CACHE": str(tmp_path / "npm"),
        "UV_CACHE_DIR": str(tmp_path / "uv"),
    }
    version = subprocess.run([str(UVX), "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("uv"), version
    guarded = subprocess.run(
        [str(UVX), "--", "--version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert guarded.returncode != 0 and not guarded.stdout.startswith("uv"), guarded
    assert "package name" in guarded.stderr, guarded.stderr

    npm_version = subprocess.run([npx, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert npm_version.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\s*", npm_version.stdout), npm_version
    guarded = subprocess.run(
        [npx, "-y", "--", "--version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert guarded.returncode != 0 and guarded.stdout.strip() != npm_version.stdout.strip(), guarded
