"""The Dockerfile builds the same image layout as `make image` (devcluster/image.py).

No Docker engine or buildah runs on the machines this is developed and tested on (a docker client
without a daemon at most), so the Dockerfile is never built here; this test reads it and compares
what users would get with what `make image` builds and the real-node tier runs: base packages, the
venv at /opt/mcpfleet, Node and npm in /usr/local, user and HOME, the environment (offline package
caches included), the warmed servers, entrypoint and default command.
"""

from __future__ import annotations

import json
import re
import shlex

from mcpfleet.devcluster import image
from tests.conftest import REPO_ROOT

DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(
        r"\\\n\s*",
        " ",
        "\n".join(line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#")),
    )
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


def _env(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for word, args in stage:
        if word == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def test_final_stage_matches_make_image() -> None:
    stage = _final_stage()
    assert _env(stage) == image.IMAGE_ENV
    users = [args for word, args in stage if word == "USER"]
    assert users == [str(image.USER_ID)]
    assert [args for word, args in stage if word == "WORKDIR"][-1] == image.HOME
    assert json.loads(next(args for word, args in stage if word == "ENTRYPOINT")) == list(image.ENTRYPOINT)
    assert json.loads(next(args for word, args in stage if word == "CMD")) == list(image.CMD)
    runs = " ".join(args for word, args in stage if word == "RUN")
    assert f"useradd --uid {image.USER_ID} --user-group --create-home --home-dir {image.HOME}" in runs
    assert "COPY --from=build /opt/mcpfleet /opt/mcpfleet" in " ".join(f"{w} {a}" for w, a in stage)


def test_base_packages_and_warmed_servers_match() -> None:
    everything = " ".join(f"{word} {args}" for word, args in _instructions())
    installs = re.findall(r"apt-get install -y --no-install-recommends ([^&]+)", everything)
    assert len(installs) == 1 and set(installs[0].split()) == set(image.BASE_PACKAGES)
    assert "FROM debian:" + image.SUITE in DOCKERFILE
    runs = " ".join(args for word, args in _final_stage() if word == "RUN")
    for pkg in image.WARM_UVX:
        assert f"uvx {pkg} --help" in runs, pkg
    for pkg in image.WARM_NPX:
        assert f"npx -y {pkg}" in runs and f"node_modules/{pkg}/package.json" in runs, pkg
    # Node 22 and npm land where image.py puts them (/usr/local), npx and npm linked on PATH.
    assert "COPY --from=node:22-bookworm-slim /usr/local/bin/node /usr/local/bin/node" in DOCKERFILE
    assert "/usr/local/bin/npx" in runs and "/usr/local/bin/npm" in runs
