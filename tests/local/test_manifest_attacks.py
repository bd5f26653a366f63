"""The manifest attack corpus against `mcpfleet up` (issue 11, "make it permanent").

Every generated case goes through the loader: it must answer (no exception, no hang, bounded time)
with an error naming the file, the document and the field, never echo a secret it was pointed at,
never accept a name or namespace that could leave the state dir, and change nothing outside the
state dir. A representative subset is then dropped into the folder of a live `mcpfleet up` whose
workloads must keep running while it reports each bad file.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.platform.local.loader import load_dir
from mcpfleet.platform.local.paths import safe_join
from tests.local.attack_corpus import SECRET_MARKER, Attack, doc, loader_attacks, materialise, text
from tests.local.conftest import MCPFLEET, Up, manifest, start_up, stop_process
from tests.local.sandbox import changes, make_sandbox

ATTACKS = loader_attacks()
LOADER_SECONDS = 10.0
"""A generous bound for one case on a loaded 2-core machine; the slowest takes about 1 s."""


def _check_loaded(attack: Attack, root: Path) -> list[str]:
    box = make_sandbox(root)
    materialise(attack, root, box.manifests)
    before = box.snapshot()
    started = time.monotonic()
    result = load_dir(box.manifests, attack.limits, attack.owners)
    elapsed = time.monotonic() - started
    errors = [str(e) for e in result.errors]
    joined = "\n".join(errors)
    assert elapsed < LOADER_SECONDS, f"{attack.id} took {elapsed:.1f}s"
    if attack.expect_errors:
        assert errors, f"{attack.id}: no error reported"
    for expected in attack.expect_errors:
        assert expected in joined, f"{attack.id}: {expected!r} not in {errors}"
    assert len(result.objects) == attack.expect_objects, (
        attack.id,
        [o.source for o in result.objects],
        errors,
    )
    if attack.expect_sources:
        assert tuple(o.source for o in result.objects) == attack.expect_sources
    # Nothing read through a link to outside reaches a message; nothing unprintable is echoed.
    assert SECRET_MARKER not in joined
    assert not any(c in joined for c in ("\x00", "\x1b", "\u202e", "\u200b")), joined[:500]
    assert len(joined) < 2_000_000
    for error in result.errors:
        assert error.file and not error.file.startswith(("/", "..")), error
    state = root / "state"
    for loaded in result.objects:
        kind, namespace, name = loaded.key
        assert safe_join(state, "config", kind.lower(), namespace, name).is_relative_to(state)
    assert changes(before, box.snapshot()) == []
    return errors


@pytest.mark.timeout(60)
@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_loader_holds(attack: Attack, tmp_path: Path) -> None:
    _check_loaded(attack, tmp_path)


def test_corpus_size() -> None:
    """The corpus is generated; keep it from shrinking by accident (the report quotes its size)."""
    assert len(ATTACKS) >= 300
    assert len({a.id for a in ATTACKS}) == len(ATTACKS)


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40))
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(["MCPServer", "MCPGroup", "MCPRemoteProxy", "VirtualMCPServer", "x"]),
    name=st.one_of(st.text(max_size=70), _json),
    namespace=st.one_of(st.text(max_size=70), _json),
    spec=_json,
)
def test_fuzzed_manifests_never_break_the_loader(
    tmp_path_factory: pytest.TempPathFactory, kind: str, name: Any, namespace: Any, spec: Any
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    attack = Attack("fuzz", {"m.yaml": text(doc(kind, name, namespace, spec))}, expect_objects=-1)
    box = make_sandbox(root)
    materialise(attack, root, box.manifests)
    result = load_dir(box.manifests)
    assert len(result.objects) + len(result.errors) == 1
    for loaded in result.objects:
        _, ns, obj_name = loaded.key
        assert safe_join(root / "state", "config", "x", ns, obj_name).is_relative_to(
            (root / "state").resolve()
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(st.binary(max_size=3000), st.text(max_size=3000)))
def test_fuzzed_file_contents_never_break_the_loader(
    tmp_path_factory: pytest.TempPathFactory, content: Any
) -> None:
    folder = tmp_path_factory.mktemp("bytes")
    path = folder / "m.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, errors="surrogatepass")
    started = time.monotonic()
    result = load_dir(folder)
    assert time.monotonic() - started < LOADER_SECONDS
    assert all(e.file == "m.yaml" for e in result.errors)


# -- a live `mcpfleet up` ----------------------------------------------------------------------

LIVE_SUBSET = (
    "namespace-MCPRemoteProxy-2",  # ../../../outside
    "namespace-MCPRemoteProxy-3",  # /abs/outside
    "name-MCPRemoteProxy-1",  # ../../outside
    "name-MCPGroup-18",  # [/]: rich markup
    "name-MCPGroup-19",  # ANSI escape
    "symlink-file-outside",
    "symlink-absolute-proc",
    "symlink-dir-outside",
    "fifo-named-yaml",
    "size-sparse-1gib",
    "binary-random-0",
    "bomb-billion-laughs",
    "bomb-recursive-alias",
    "deep-flow-100000",
    "tag-python-apply",
    "scalar-huge-int",
    "metadata-string",
)


def _survivor(port: int = 9) -> str:
    return manifest("MCPRemoteProxy", "survivor", {"remoteURL": f"http://127.0.0.1:{port}/mcp"})


@pytest.mark.timeout(240)
async def test_live_up_survives_the_corpus(tmp_path: Path) -> None:
    box = make_sandbox(tmp_path)
    (box.manifests / "survivor.yaml").write_text(_survivor() + "\n---\n" + manifest("MCPGroup", "team", {}))
    before = box.snapshot()
    process = start_up(box.manifests, box.state, tmp_path / "up.log")
    up = Up(process, box.manifests, box.state, tmp_path / "up.log")
    try:
        await up.wait_phase("MCPRemoteProxy", "survivor", {"Running"}, limit=90)
        pid = await up.wait_for(
            "survivor's pid", lambda: up.processes().get("MCPRemoteProxy/default/survivor/proxy/0")
        )

        by_id = {a.id: a for a in ATTACKS}
        reported: list[str] = []
        for attack_id in LIVE_SUBSET:
            attack = by_id[attack_id]
            renamed = Attack(attack.id, {f"{attack.id}-{name}": c for name, c in attack.files.items()})
            materialise(renamed, tmp_path, box.manifests)
            if attack.expect_errors:
                reported += [f"{attack.id}-{name}" for name in attack.files]
        # A duplicate of the running object in a new file that sorts first, and a syntax error in
        # the running object's own file: it keeps running.
        (box.manifests / "aaa-takeover.yaml").write_text(_survivor(10))
        (box.manifests / "survivor.yaml").write_text(_survivor() + "\n---\nkind: [unclosed\n")
        reported += ["aaa-takeover.yaml", "survivor.yaml"]

        def all_reported() -> list[str] | None:
            output = up.output.read_text()
            missing = [name for name in reported if name not in output]
            return None if missing else reported

        await up.wait_for("every bad file reported", all_reported, limit=60)
        await asyncio.sleep(3)  # a few more passes with the whole corpus in place
        assert process.poll() is None, up.output.read_text()
        status = up.objects("MCPRemoteProxy")["survivor"]
        assert status["phase"] == "Running", status
        assert "the current one is invalid" in status["message"]
        assert up.processes().get("MCPRemoteProxy/default/survivor/proxy/0") == pid
        assert set(up.objects("MCPRemoteProxy")) == {"survivor"}
        assert set(up.objects("MCPGroup")) == {"team"}
        output = up.output.read_text()
        assert SECRET_MARKER not in output and "Traceback" not in output
        listing = await asyncio.to_thread(
            subprocess.run,
            [MCPFLEET, "get", "all", "--state-dir", str(box.state)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listing.returncode == 0 and "survivor" in listing.stdout, listing.stderr
        with (box.state / "state.db").open("rb") as db:
            assert SECRET_MARKER.encode() not in db.read()
    finally:
        stop_process(process)
    assert process.returncode == 0
    assert changes(before, box.snapshot()) == []
    assert not (box.root / "pwned").exists() and not (box.outside / "pwned").exists()
    json.dumps(status)  # the status stayed plain JSON
