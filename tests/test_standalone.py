"""The repository stands alone: no tracked file names a path on a developer's machine.

A path like a workspace folder, a personal home directory or a sibling `shared/` checkout works on the
machine it was written on and nowhere else (a fresh `git clone` + `make test` must pass with nothing
beside the checkout). Paths that mean the same everywhere stay allowed: system paths (`/etc/...`,
`/var/lib/...`, `/usr/...`), `/tmp`, and the home directories of container users that an image creates
(our Dockerfile's `/home/mcpfleet`, ToolHive's `/home/appuser`). The patterns below are spelt so
that this file does not match them itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.reference import ROOT

# Home directories of users created inside container images, not of a developer.
CONTAINER_HOMES = ("mcpfleet", "appuser")

# A path starts at the beginning of a token (not inside a URL path or a word).
_START = r"(?<![\w.~/-])"
MACHINE_PATTERNS = {
    "workspace folder": re.compile(_START + r"/wor[k]/"),
    "root's home": re.compile(_START + r"/roo[t]/"),
    "a personal home": re.compile(_START + r"/hom[e]/(?!(?:" + "|".join(CONTAINER_HOMES) + r")\b)[\w.-]+"),
    "a macOS home": re.compile(_START + r"/User[s]/[\w.-]+"),
    "a Windows home": re.compile(r"\b[A-Za-z]:\\User[s]\\"),
    "a sibling shared/ checkout": re.compile(r"\.\./share[d]\b"),
}


def _tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60)
    assert listed.returncode == 0, f"git ls-files failed in {ROOT} (not a git checkout?): {listed.stderr!r}"
    files = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    assert len(files) > 100, f"git ls-files listed only {len(files)} files in {ROOT}"
    return files


def machine_paths(text: str, checkout: str) -> list[str]:
    """The machine-specific paths in `text` (`checkout`: this checkout's own absolute path)."""
    found = [
        f"{what}: {m.group(0)!r}"
        for what, pattern in MACHINE_PATTERNS.items()
        for m in pattern.finditer(text)
    ]
    if checkout and checkout in text:
        found.append(f"this checkout: {checkout!r}")
    return found


def test_no_tracked_file_names_a_machine_path() -> None:
    # This checkout's own path too, when it is specific enough not to collide with a system path.
    checkout = str(ROOT) if len(ROOT.parts) >= 4 else ""
    problems = []
    for path in _tracked_files():
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        for number, line in enumerate(text.splitlines(), 1):
            for hit in machine_paths(line, checkout):
                problems.append(f"{path.relative_to(ROOT)}:{number}: {hit}")
    assert not problems, "tracked files name machine-specific paths:\n" + "\n".join(problems)


def test_machine_path_patterns_catch_and_allow_what_they_should() -> None:
    bad = [
        "/" + "work/shared/bench",
        "cd /" + "root/src",
        "state: /" + "home/alice/.mcpfleet",
        "/" + "Users/bob/code",
        "C:\\" + "Users\\carol",
        "see ../" + "shared/reference",
    ]
    good = [
        "/etc/ssl/certs",
        "/var/lib/postgresql",
        "/tmp/mcpfleet-cluster",
        "mounted at /home/appuser/.pgpass",
        "HOME=/home/mcpfleet",
        "https://example.com/" + "work/x",
        "~/.cache/mcpfleet",
        "the shared reference data",
    ]
    for line in bad:
        assert machine_paths(line, "/nowhere"), line
    for line in good:
        assert not machine_paths(line, "/nowhere"), line
