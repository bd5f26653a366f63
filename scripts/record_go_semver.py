"""Record Go's module semver answers (validity and order) for the registry's version tests.

Builds scripts/gosemver against the copy of golang.org/x/mod/semver that ships inside the Go
distribution (`$(go env GOROOT)/src/cmd/vendor`), offline, feeds it the version strings below
(hand-written edge cases plus a deterministic generated set) and writes
tests/registry/data/go_semver.json with the Go version used. Run: `python scripts/record_go_semver.py`.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "registry" / "data" / "go_semver.json"
EDGE = """1.0.0 v1.0.0 1.0.0+build1 1.0.0-rc-1 01.0.0 1.0.0-alpha.01 1.0 v1 1 1.2-pre 1.2+b 1.0.0- 1.0.0+
V1.0.0 vv1.0.0 1.0.0-rc.9 1.0.0-rc.10 1.0.0-rc.1 1.0.0-alpha 1.0.0-alpha.1 1.0.0-alpha.beta 1.0.0-beta
1.0.0-beta.2 1.0.0-beta.11 1.0.0-rc.1+b 1.0.0-0 1.0.0-0a 1.0.0-00 1.0.0-a..b 1.0.0-rc_1 +1.2.3 -1.2.3
1.2.3.4 1.0.99999999999999999999 99999999999999999999.0.0 0.0.0 0.0.0-0 1.0.0+001 1.0.0+a.b.c
1.0.0-x.7.z.92 1.0.0--- 1.0.0-a-b 2.0.0 10.0.0 1.10.0 1.2.0 1.0.0-A 1.0.0-a 1.0.0-Z 1.0.0-1 1.0.0-2
snapshot latest 2024-12 2025.01.01 1.0.0.0 v 1.0.0-rc.1.2 1.0.0-rc.1.10 1.0.0-rc.01 1.0.0-+b""".split()


def generated(n: int = 250) -> list[str]:
    rng = random.Random(27)
    idents = [
        "0",
        "1",
        "2",
        "9",
        "10",
        "11",
        "01",
        "a",
        "b",
        "rc",
        "alpha",
        "beta",
        "x-y",
        "-",
        "1a",
        "A",
        "",
    ]
    out: list[str] = []
    for _ in range(n):
        core = ".".join(
            rng.choice(["0", "1", "2", "10", "01", "3"]) for _ in range(rng.choice([1, 2, 3, 3, 3, 4]))
        )
        version = rng.choice(["", "v"]) + core
        if rng.random() < 0.6:
            version += "-" + ".".join(rng.choice(idents) for _ in range(rng.randint(1, 3)))
        if rng.random() < 0.3:
            version += "+" + ".".join(rng.choice(["001", "b", "x-1", ""]) for _ in range(rng.randint(1, 2)))
        out.append(version)
    return out


def main() -> None:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    goroot = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip()
    vendored = Path(goroot) / "src" / "cmd" / "vendor" / "golang.org" / "x" / "mod" / "semver"
    versions = list(dict.fromkeys(itertools.chain(EDGE, generated())))
    with tempfile.TemporaryDirectory() as tmp:
        mod = Path(tmp) / "xmod"
        (mod / "semver").mkdir(parents=True)
        (mod / "go.mod").write_text("module golang.org/x/mod\n\ngo 1.21\n")
        shutil.copy(vendored / "semver.go", mod / "semver" / "semver.go")
        main_dir = Path(tmp) / "main"
        main_dir.mkdir()
        shutil.copy(ROOT / "scripts" / "gosemver" / "main.go", main_dir / "main.go")
        (main_dir / "go.mod").write_text(
            "module gosemver\n\ngo 1.21\n\nrequire golang.org/x/mod v0.0.0\n\nreplace golang.org/x/mod => ../xmod\n"
        )
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
        result = subprocess.run(
            [go, "run", "."], cwd=main_dir, input="\n".join(versions), capture_output=True, text=True, env=env
        )
        if result.returncode != 0:
            raise SystemExit(result.stderr)
        version = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout.strip()
    answers = json.loads(result.stdout)
    rows = {key: ",\n".join(json.dumps(row) for row in answers[key]) for key in ("valid", "order")}
    OUT.write_text(
        f'{{"recordedWith": {json.dumps(version)},\n"valid": [\n{rows["valid"]}\n],\n"order": [\n{rows["order"]}\n]}}\n'
    )
    print(f"{OUT}: {len(answers['valid'])} versions, {len(answers['order'])} valid")


if __name__ == "__main__":
    main()
