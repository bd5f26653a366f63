"""The container runtime's command line for an image MCPServer under `mcpfleet up` (issue 29): the
permission profile as `run` flags, the env file, and its hostile suite (a corpus of hostile manifest
values, each refused naming the field or kept out of the runtime's options, and property tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.api.permissions import BUILTIN, NetworkPermissions, OutboundPermissions, PermissionProfile
from mcpfleet.platform.local import containers
from mcpfleet.platform.local.containers import ContainerError, Runtime, env_file_text, find_runtime, run_argv

PODMAN = Runtime("podman", "/usr/bin/podman")
DOCKER = Runtime("docker", "/usr/bin/docker")
LABELS = containers.fleet_labels("f" * 16, "r" * 16, "default", "time")


def argv_for(
    profile: PermissionProfile,
    *,
    runtime: Runtime = PODMAN,
    args: tuple[str, ...] = (),
    entrypoint: tuple[str, ...] = (),
    image: str = "localhost/img:1",
) -> list[str]:
    return run_argv(
        runtime,
        image=image,
        args=args,
        entrypoint=entrypoint,
        profile=profile,
        env_file=Path("/state/config/mcpserver/default/time/container/env"),
        labels=LABELS,
    )


def options(argv: list[str]) -> list[str]:
    """The runtime's options: everything before the `--` that ends them."""
    return argv[: argv.index("--")]


def test_builtin_none_has_no_network_and_every_restriction() -> None:
    argv = argv_for(BUILTIN["none"])
    assert argv[:4] == ["/usr/bin/podman", "run", "--rm", "-i"]
    opts = options(argv)
    for flag in (
        "--network=none",
        "--read-only",
        "--read-only-tmpfs=true",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--init",
        "--http-proxy=false",
        "--env-file=/state/config/mcpserver/default/time/container/env",
        "--label=mcpfleet.dev/fleet=" + "f" * 16,
        "--label=mcpfleet.dev/fleet-run=" + "r" * 16,
    ):
        assert flag in opts
    assert not any(o.startswith("--volume") for o in opts)
    assert argv[argv.index("--") + 1 :] == ["localhost/img:1"]


def test_builtin_network_keeps_the_default_network() -> None:
    opts = options(argv_for(BUILTIN["network"]))
    assert not any(o.startswith("--network") for o in opts)
    assert "--read-only" in opts and "--cap-drop=ALL" in opts


def test_allow_lists_are_refused_not_widened() -> None:
    restricted = PermissionProfile(
        network=NetworkPermissions(outbound=OutboundPermissions(allow_port=(443,)))
    )
    with pytest.raises(ContainerError, match=r"spec.permissionProfile: outbound allow-lists"):
        argv_for(restricted)


def test_profile_paths_are_mounted_at_the_same_place(tmp_path: Path) -> None:
    readable, writable = tmp_path / "r", tmp_path / "w"
    readable.mkdir()
    writable.mkdir()
    profile = PermissionProfile(read=(str(readable),), write=(str(writable),))
    opts = options(argv_for(profile))
    assert f"--volume={readable}:{readable}:ro" in opts
    assert f"--volume={writable}:{writable}:rw" in opts


def test_an_http_server_gets_its_port_published_on_loopback_only() -> None:
    argv = run_argv(
        PODMAN,
        image="localhost/img:1",
        args=(),
        entrypoint=(),
        profile=BUILTIN["network"],
        env_file=Path("/e"),
        labels=LABELS,
        publish=9000,
        name="mcpfleet-f-default-web",
    )
    opts = options(argv)
    assert "--publish=127.0.0.1:9000:9000" in opts and "-i" not in opts
    assert "--name=mcpfleet-f-default-web" in opts and "--replace" in opts
    assert "--name=mcpfleet-f-default-web" not in options(argv_for(BUILTIN["network"]))  # stdio: no name


def test_docker_gets_the_same_restrictions_in_its_own_flags() -> None:
    argv = argv_for(BUILTIN["none"], runtime=DOCKER, entrypoint=("sh", "-c", "exec srv"), args=("--x",))
    opts = options(argv)
    assert "--http-proxy=false" not in opts and "--read-only-tmpfs=true" not in opts
    assert any(o.startswith("--tmpfs=/tmp:") for o in opts)
    assert "--entrypoint=sh" in opts
    assert argv[argv.index("--") + 1 :] == ["localhost/img:1", "-c", "exec srv", "--x"]


def test_podman_entrypoint_is_the_whole_command_as_json() -> None:
    argv = argv_for(BUILTIN["none"], entrypoint=("sh", "-c", 'exec srv "$@"', "srv"), args=("--tz=UTC",))
    (entry,) = [o for o in options(argv) if o.startswith("--entrypoint=")]
    assert json.loads(entry.removeprefix("--entrypoint=")) == ["sh", "-c", 'exec srv "$@"', "srv"]
    assert argv[argv.index("--") + 1 :] == ["localhost/img:1", "--tz=UTC"]


def test_ulimits_never_exceed_ups_own() -> None:
    import resource

    opts = options(argv_for(BUILTIN["none"]))
    nofile = next(o for o in opts if o.startswith("--ulimit=nofile="))
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    value = int(nofile.split("=")[2].split(":")[0])
    assert value <= containers.MAX_NOFILE and (soft == resource.RLIM_INFINITY or value <= soft)


def test_client_env_has_the_users_home_and_runtime_settings_only() -> None:
    base = {"PATH": "/venv/bin:/usr/bin", "MCPFLEET_FLEET": "f", "HOME": "/private/home"}
    outside = {
        "HOME": "/users-home",
        "XDG_RUNTIME_DIR": "/run/user/1",
        "GITHUB_TOKEN": "t",
        "CONTAINERS_CONF": "/c",
    }
    env = containers.client_env(outside, base)
    assert env == {
        "PATH": "/venv/bin:/usr/bin",
        "MCPFLEET_FLEET": "f",
        "HOME": "/users-home",
        "XDG_RUNTIME_DIR": "/run/user/1",
        "CONTAINERS_CONF": "/c",
    }


# -- runtime detection ----------------------------------------------------------------------------


def test_runtime_none_is_an_explicit_choice() -> None:
    runtime, why = find_runtime({"MCPFLEET_CONTAINER_RUNTIME": "none", "PATH": os.environ["PATH"]})
    assert runtime is None and "MCPFLEET_CONTAINER_RUNTIME=none" in why


def test_no_runtime_on_path(tmp_path: Path) -> None:
    runtime, why = find_runtime({"PATH": str(tmp_path)})
    assert runtime is None and "podman: not found" in why and "docker: not found" in why


def test_a_named_runtime_must_be_podman_or_docker(tmp_path: Path) -> None:
    fake = tmp_path / "runc"
    fake.write_text("#!/bin/sh\necho 1\n")
    fake.chmod(0o755)
    runtime, why = find_runtime({"PATH": str(tmp_path), "MCPFLEET_CONTAINER_RUNTIME": str(fake)})
    assert runtime is None and "not podman or docker" in why


def test_a_docker_client_without_daemon_is_no_runtime(tmp_path: Path) -> None:
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    runtime, why = find_runtime({"PATH": str(tmp_path)})
    assert runtime is None and "Cannot connect to the Docker daemon" in why


def test_podman_on_this_machine_is_found() -> None:
    runtime, why = find_runtime({"PATH": "/usr/bin:/bin"})
    assert runtime is not None, f"podman is needed by the image tests (Debian: apt-get install podman): {why}"
    assert runtime.name == "podman"


# -- hostile suite ------------------------------------------------------------------------------

HOSTILE_ENV = [
    ({"A": "line\nINJECTED=1"}, "env A: a value with a line break"),
    ({"A": "cr\rB=2"}, "env A: a value with a line break"),
    ({"A": "nul\0"}, "env A: a value with a line break"),
    ({"A=B": "x"}, "not a name a container runtime reads"),
    ({" A": "x"}, "not a name a container runtime reads"),
    ({"#A": "x"}, "not a name a container runtime reads"),
    ({"HOST*": "x"}, "not a name a container runtime reads"),  # podman: import every HOST* of its own env
    ({"": "x"}, "not a name a container runtime reads"),
]


@pytest.mark.parametrize(("declared", "message"), HOSTILE_ENV)
def test_hostile_env_is_refused_naming_the_variable(declared: dict[str, str], message: str) -> None:
    with pytest.raises(ContainerError, match=message):
        env_file_text(declared)


HOSTILE_PATHS = ["/does/not/exist", "/tmp/with:colon", "/tmp/with,comma"]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_profile_paths_are_refused(path: str, tmp_path: Path) -> None:
    if path != "/does/not/exist":
        path = str(tmp_path / Path(path).name)
        os.mkdir(path)
    with pytest.raises(ContainerError, match=r"spec.permissionProfile: read\[0\]"):
        argv_for(PermissionProfile(read=(path,)))


def test_a_write_path_the_user_cannot_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "ro"
    target.mkdir(mode=0o500)
    # Root passes access(2) on its own folders whatever their mode: ask as an unprivileged user would.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if p == str(target) else real_access(p, m))
    with pytest.raises(ContainerError, match=r"write\[0\] .*: not writable"):
        argv_for(PermissionProfile(write=(str(target),)))


HOSTILE_ARGS = ["--privileged", "--network=host", "-v=/:/host", "--entrypoint=/bin/sh", "--", "-"]


@pytest.mark.parametrize("hostile", HOSTILE_ARGS)
def test_hostile_args_image_and_command_stay_after_the_options(hostile: str) -> None:
    argv = argv_for(BUILTIN["none"], args=(hostile,), entrypoint=(hostile,), image=hostile)
    opts = options(argv)
    assert hostile not in opts and "--privileged" not in opts and "--network=host" not in opts
    assert argv[argv.index("--") + 1] == hostile  # the image, positional


TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(NAME, TEXT, max_size=8))
def test_property_env_file_round_trips_or_refuses(declared: dict[str, str]) -> None:
    """Every mapping is either written so that reading it line by line (as the runtimes do) gives back
    exactly the same variables, or refused naming a variable; never a line that sets another."""
    try:
        text = env_file_text(declared)
    except ContainerError as exc:
        assert any(name in str(exc) for name in declared)
        assert any(set(v) & {"\n", "\r", "\0"} for v in declared.values())
        return
    # Split as the runtimes' Go scanners do: on "\n" only (str.splitlines would also split on \x1e, …).
    lines = text.split("\n")
    assert lines[-1] == "" if declared else text == ""
    parsed = dict(line.split("=", 1) for line in lines[:-1])
    assert parsed == declared


@settings(max_examples=300, deadline=None)
@given(
    st.lists(TEXT, max_size=6),
    st.lists(TEXT, min_size=1, max_size=4),
    TEXT,
    st.sampled_from([PODMAN, DOCKER]),
)
def test_property_manifest_values_never_become_runtime_options(
    args: list[str], entrypoint: list[str], image: str, runtime: Runtime
) -> None:
    argv = argv_for(
        BUILTIN["none"], runtime=runtime, args=tuple(args), entrypoint=tuple(entrypoint), image=image
    )
    opts = options(argv)
    # The options are ours: fixed flags, labels, limits, the env file and the entrypoint (one `=` form).
    manifest_derived = [o for o in opts if o.startswith("--entrypoint=")]
    assert len(manifest_derived) == 1
    assert all(o.startswith("--") or o in ("run", "-i", runtime.path) for o in opts)
    tail = argv[argv.index("--") + 1 :]
    assert tail[0] == image
    if runtime.name == "podman":
        assert json.loads(manifest_derived[0].removeprefix("--entrypoint=")) == entrypoint
        assert tail[1:] == args
    else:
        assert manifest_derived[0] == f"--entrypoint={entrypoint[0]}"
        assert tail[1:] == [*entrypoint[1:], *args]
