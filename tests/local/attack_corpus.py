"""The manifest attack corpus for `mcpfleet up` (issue 11): generated hostile manifest folders.

Each `Attack` is a set of files to drop into a manifests folder and what the loader must say about
them. The corpus is generated from a few lists (hostile names, namespaces, kinds, YAML shapes) so
it grows with them; `test_manifest_attacks` runs every case through the loader and a representative
subset through a live `mcpfleet up`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet.api.kinds import KIND_BY_NAME
from mcpfleet.yamlread import ManifestLimits

KINDS = tuple(KIND_BY_NAME)

HOSTILE_NAMES = (
    "..",
    "../../outside",
    "/abs/outside",
    "a/b",
    "a\\b",
    ".hidden",
    "a.b",
    "UPPER",
    "under_score",
    "-lead",
    "trail-",
    "x" * 254,
    "é",
    "admin\u202egnp",  # right-to-left override
    "zero\u200bwidth",
    "\uff44\uff45\uff46\uff41\uff55\uff4c\uff54",
    "name\n",
    "nul\x00",
    "[/]",
    "\x1b[31mred",
    "",
)
HOSTILE_NAMESPACES = (
    "..",
    "../../outside",
    "../../../outside",
    "/abs/outside",
    "a/b",
    ".",
    "a.b",
    "Default",
    "a" * 64,
    "é",
    "ns\u200b",
    "default\n",
    "\x00",
    "",
)
LIMITS = ManifestLimits()
SECRET_MARKER = "hunter2"
"""The value in the sandbox's outside/private.env: it must never appear in any error or status."""

Content = bytes | str


@dataclass(frozen=True)
class Symlink:
    """A symlink to create in the manifests folder; `target` is relative to the sandbox root unless absolute."""

    target: str


@dataclass(frozen=True)
class Attack:
    id: str
    files: dict[str, Content | Symlink | Callable[[Path], None]]
    expect_errors: tuple[str, ...] = ()
    """Substrings that must appear in the loader's errors (all of them)."""
    expect_objects: int = 0
    limits: ManifestLimits = LIMITS
    owners: dict[tuple[str, str, str], str] = field(default_factory=dict)
    expect_sources: tuple[str, ...] = ()
    """When set, the `source` of the loaded objects, in order."""


def doc(kind: str, name: Any = "ok", namespace: Any = None, spec: Any = None, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": {} if spec is None else spec,
    }


def text(*documents: Any) -> str:
    return "\n---\n".join(json.dumps(d) for d in documents) + "\n"


VALID_GROUP = text(doc("MCPGroup", "team"))


def _names() -> list[Attack]:
    return [
        Attack(f"name-{kind}-{index}", {"m.yaml": text(doc(kind, name))}, ("metadata.name",))
        for kind in KINDS
        for index, name in enumerate(HOSTILE_NAMES)
    ]


def _namespaces() -> list[Attack]:
    return [
        Attack(
            f"namespace-{kind}-{index}", {"m.yaml": text(doc(kind, "ok", namespace))}, ("metadata.namespace",)
        )
        for kind in KINDS
        for index, namespace in enumerate(HOSTILE_NAMESPACES)
    ]


def _metadata_shapes() -> list[Attack]:
    shapes: list[tuple[str, dict[str, Any]]] = [
        ("metadata-string", {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPGroup", "metadata": "x"}),
        ("metadata-list", {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPGroup", "metadata": [1]}),
        ("metadata-null", {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPGroup", "metadata": None}),
        ("metadata-missing", {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPGroup", "spec": {}}),
        ("name-int", doc("MCPGroup", 7)),
        ("name-list", doc("MCPGroup", ["a"])),
        ("name-map", doc("MCPGroup", {"a": 1})),
        ("name-null", doc("MCPGroup", None)),
        ("name-bool", doc("MCPGroup", True)),
        ("namespace-int", doc("MCPGroup", "ok", 5)),
        ("namespace-list", doc("MCPGroup", "ok", ["default"])),
        ("labels-list", doc("MCPGroup", "ok", labels=["a"])),
        (
            "kind-list",
            {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": ["MCPGroup"], "metadata": {"name": "a"}},
        ),
        ("kind-unknown", doc("Secret")),
        ("apiversion-wrong", {**doc("MCPGroup"), "apiVersion": "v1"}),
        ("spec-string", doc("MCPServer", spec="x")),
        ("spec-deep-unknown", doc("MCPServer", spec={"image": "uvx://x", "nested": {"a": {"b": {"c": 1}}}})),
    ]
    attacks = [Attack(i, {"m.yaml": text(d)}, ("",)) for i, d in shapes]
    # Kubernetes caps label values at 63 characters; mcpfleet does not validate labels (yet): a
    # huge one is stored as is, and must not break anything.
    big_labels = text(doc("MCPGroup", "ok", labels={"a": "v" * 100_000}))
    attacks.append(Attack("labels-huge-value", {"m.yaml": big_labels}, expect_objects=1))
    for value, label in (("[1, 2]", "list"), ("42", "int"), ("just text", "scalar"), ("!!null", "null-tag")):
        expected = () if label == "null-tag" else ("expected a mapping",)
        attacks.append(Attack(f"toplevel-{label}", {"m.yaml": value + "\n"}, expected))
    return attacks


def _sizes() -> list[Attack]:
    limit = LIMITS.max_file_bytes

    def sparse(size: int) -> Callable[[Path], None]:
        def make(path: Path) -> None:
            with path.open("wb") as handle:
                handle.truncate(size)  # sparse: costs no disk, but `read()` would return all of it

        return make

    padded = VALID_GROUP + "#" * (limit - len(VALID_GROUP) - 1) + "\n"
    return [
        Attack("size-one-over", {"m.yaml": "#" * (limit + 1)}, ("larger than",)),
        Attack("size-at-limit-valid", {"m.yaml": padded}, expect_objects=1),
        Attack("size-sparse-1gib", {"m.yaml": sparse(1 << 30)}, ("larger than",)),
        Attack(
            "size-long-scalar",
            {"m.yaml": text(doc("MCPGroup", "ok", spec={"description": "d" * 900_000}))},
            ("spec.description: String should have at most 1024 characters",),
        ),
        Attack("size-many-nodes", {"m.yaml": "[" + ",".join(["1"] * 150_000) + "]"}, ("YAML nodes",)),
        Attack("size-many-block-nodes", {"m.yaml": "- 1\n" * 200_000}, ("YAML nodes",)),
        Attack("size-many-documents", {"m.yaml": "--- 1\n" * 100_000}, ("YAML nodes",)),
        Attack("size-many-empty-documents", {"m.yaml": "---\n" * 15_000 + VALID_GROUP}, expect_objects=1),
        Attack(
            "size-too-many-files",
            {f"f{i}.yaml": text(doc("MCPGroup", f"g{i}")) for i in range(8)},
            ("more than 5 manifest files",),
            expect_objects=5,
            limits=ManifestLimits(max_files=5),
        ),
    ]


def _binaries() -> list[Attack]:
    generator = random.Random(11)
    attacks = [
        Attack(f"binary-random-{i}", {"m.yaml": bytes(generator.randrange(256) for _ in range(4096))}, ("",))
        for i in range(6)
    ]
    attacks += [
        Attack("binary-nul-bytes", {"m.yaml": b"kind: MCPGroup\x00\x00\n"}, ("",)),
        Attack("binary-elf", {"m.yaml": b"\x7fELF\x02\x01\x01" + bytes(100)}, ("",)),
        Attack("binary-utf16", {"m.yaml": VALID_GROUP.encode("utf-16")}, ("",)),
        Attack("binary-invalid-utf8", {"m.yaml": b"name: \xff\xfe\xc3\x28\n"}, ("not UTF-8",)),
        Attack("binary-utf8-bom", {"m.yaml": b"\xef\xbb\xbf" + VALID_GROUP.encode()}, expect_objects=1),
        Attack("binary-control-chars", {"m.yaml": "name: \x07\x1b[2J\n"}, ("",)),
    ]
    return attacks


def _lol(levels: int, fan: int) -> str:
    lines = ['l0: &l0 "lol"']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def _bombs() -> list[Attack]:
    deep_chain = ["a0: &a0 " + "[" * 90 + "1" + "]" * 90]
    for i in range(1, 5):
        deep_chain.append(f"a{i}: &a{i} " + "[" * 90 + f"*a{i - 1}" + "]" * 90)
    merge = ["base: &b0 {k0: v}"] + [
        f"m{i}: &b{i} {{<<: [*b{i - 1}, *b{i - 1}], k{i}: v}}" for i in range(1, 30)
    ]
    attacks = [
        Attack("bomb-billion-laughs", {"m.yaml": _lol(10, 10)}, ("YAML nodes",)),
        Attack(
            "bomb-in-a-manifest",
            {"m.yaml": _lol(9, 9) + "apiVersion: mcpfleet.dev/v1alpha1\n"},
            ("YAML nodes",),
        ),
        Attack(
            "bomb-quadratic-string",
            {"m.yaml": 'a: &a "' + "x" * 60_000 + '"\nb: [' + ", ".join(["*a"] * 200) + "]\n"},
            ("characters once aliases",),
        ),
        Attack("bomb-recursive-alias", {"m.yaml": "a: &a [*a]\n"}, ("recursive alias",)),
        Attack("bomb-recursive-mapping", {"m.yaml": "a: &a {b: *a}\n"}, ("recursive alias",)),
        Attack("bomb-deep-via-aliases", {"m.yaml": "\n".join(deep_chain) + "\n"}, ("levels once aliases",)),
        Attack("bomb-merge-keys", {"m.yaml": "\n".join(merge) + "\n"}, ("YAML nodes",)),
        Attack(
            "bomb-small-alias-ok",
            {
                "m.yaml": "apiVersion: mcpfleet.dev/v1alpha1\nkind: MCPGroup\nmetadata: {name: &n team, labels: {app: *n}}\nspec: {}\n"
            },
            expect_objects=1,
        ),
    ]
    for depth in (101, 1_000, 100_000):
        attacks.append(
            Attack(f"deep-flow-{depth}", {"m.yaml": "[" * depth + "]" * depth}, ("nested deeper than",))
        )
        attacks.append(Attack(f"deep-unclosed-{depth}", {"m.yaml": "{a: " * depth}, ("",)))
    block = "".join("  " * i + f"k{i}:\n" for i in range(150)) + "  " * 150 + "v\n"
    attacks.append(Attack("deep-block-150", {"m.yaml": block}, ("nested deeper than",)))
    attacks.append(Attack("deep-90-is-fine", {"m.yaml": "[" * 90 + "]" * 90}, ("expected a mapping",)))
    return attacks


def _tags_and_scalars() -> list[Attack]:
    return [
        Attack(
            "tag-python-apply",
            {"m.yaml": '!!python/object/apply:os.system ["touch outside/pwned"]\n'},
            ("not valid YAML",),
        ),
        Attack("tag-python-name", {"m.yaml": "a: !!python/name:os.system\n"}, ("not valid YAML",)),
        Attack("tag-custom", {"m.yaml": "a: !vault xyz\n"}, ("not valid YAML",)),
        Attack("tag-binary", {"m.yaml": "a: !!binary aGVsbG8=\n"}, ("apiVersion",)),
        Attack("tag-set-omap", {"m.yaml": "a: !!set {x, y}\nb: !!omap [c: 1]\n"}, ("",)),
        Attack("scalar-huge-int", {"m.yaml": "a: " + "9" * 10_000 + "\n"}, ("",)),
        Attack(
            "scalar-timestamp-name",
            {"m.yaml": text(doc("MCPGroup", "x")).replace('"x"', "2001-12-14")},
            ("metadata.name",),
        ),
        Attack("scalar-nan-inf", {"m.yaml": "a: .nan\nb: -.inf\n"}, ("",)),
        Attack("key-unhashable", {"m.yaml": "? [a, b]\n: c\n"}, ("not valid YAML",)),
        Attack(
            "key-duplicate-in-mapping",
            {
                "m.yaml": 'apiVersion: mcpfleet.dev/v1alpha1\nkind: MCPGroup\nmetadata: {name: a, name: "../x"}\nspec: {}\n'
            },
            ("metadata.name",),
        ),
        Attack("syntax-unclosed", {"m.yaml": "kind: [unclosed\n"}, ("not valid YAML",)),
        Attack("syntax-tab-indent", {"m.yaml": "a:\n\tb: c\n"}, ("not valid YAML",)),
        Attack(
            "syntax-error-after-valid-doc",
            {"m.yaml": VALID_GROUP + "---\n: : :\n  - ]\n"},
            ("not valid YAML",),
        ),
    ]


def _symlinks() -> list[Attack]:
    def fifo(path: Path) -> None:
        import os

        os.mkfifo(path)

    return [
        Attack(
            "symlink-file-outside", {"m.yaml": Symlink("outside/private.env")}, ("symlink to a file outside",)
        ),
        Attack(
            "symlink-absolute-proc", {"m.yaml": Symlink("/proc/self/environ")}, ("symlink to a file outside",)
        ),
        Attack("symlink-dir-outside", {"sub": Symlink("outside")}, ()),  # outside/evil.yaml is not read
        Attack(
            "symlink-inside-ok",
            {"real.yaml": VALID_GROUP, "alias.yaml": Symlink("manifests/real.yaml")},
            ("duplicate of",),
            expect_objects=1,
        ),
        Attack("symlink-dangling", {"m.yaml": Symlink("outside/nope.yaml")}, ()),
        Attack(
            "symlink-loop", {"a.yaml": Symlink("manifests/b.yaml"), "b.yaml": Symlink("manifests/a.yaml")}, ()
        ),
        Attack("symlink-dev-zero", {"m.yaml": Symlink("/dev/zero")}, ()),
        Attack("fifo-named-yaml", {"m.yaml": fifo}, ()),
    ]


def _duplicates() -> list[Attack]:
    group = doc("MCPGroup", "team")
    return [
        Attack("dup-same-file", {"m.yaml": text(group, group)}, ("duplicate of m.yaml#1",), expect_objects=1),
        Attack(
            "dup-two-files-first-wins",
            {"a.yaml": text(group), "b.yaml": text(group)},
            ("duplicate of a.yaml#1",),
            expect_objects=1,
            expect_sources=("a.yaml#1",),
        ),
        Attack(
            "dup-running-owner-wins",
            {"a-new.yaml": text(group), "z-running.yaml": text(group)},
            ("a-new.yaml (document 1) MCPGroup/team: metadata.name: duplicate of z-running.yaml#1",),
            expect_objects=1,
            owners={("MCPGroup", "default", "team"): "z-running.yaml"},
            expect_sources=("z-running.yaml#1",),
        ),
        Attack(
            "dup-three-files",
            {f"{c}.yaml": text(group) for c in "abc"},
            ("duplicate of a.yaml#1",),
            expect_objects=1,
        ),
        Attack(
            "dup-other-kind-is-not",
            {"m.yaml": text(group, doc("MCPToolConfig", "team"))},
            (),
            expect_objects=2,
        ),
        Attack(
            "dup-other-namespace-is-not",
            {"m.yaml": text(group, doc("MCPGroup", "team", "other"))},
            (),
            expect_objects=2,
        ),
        Attack(
            "dup-flood", {"m.yaml": text(*([group] * 1_000))}, ("duplicate of m.yaml#1",), expect_objects=1
        ),
    ]


def loader_attacks() -> list[Attack]:
    return [
        *_names(),
        *_namespaces(),
        *_metadata_shapes(),
        *_sizes(),
        *_binaries(),
        *_bombs(),
        *_tags_and_scalars(),
        *_symlinks(),
        *_duplicates(),
    ]


def materialise(attack: Attack, root: Path, folder: Path) -> None:
    """Create the attack's files in `folder`; symlink targets are relative to the sandbox `root`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in attack.files.items():
        path = folder / name
        if isinstance(content, Symlink):
            target = Path(content.target)
            path.symlink_to(target if target.is_absolute() else root / target)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content)
        else:
            content(path)
