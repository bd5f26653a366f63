"""Which version of a server is the latest: the official registry's rules, reproduced exactly.

The official registry (modelcontextprotocol/registry, `internal/service/versioning.go` and the publish
path of `registry_service.go`) decides `isLatest` when a version is published: the new version becomes
the latest only when it compares strictly greater than the current latest, where

- a version is "semantic" when, split on `-`, it has at most two parts, the first is exactly three
  dot-separated integers (Go's `strconv.Atoi`: optional sign, ASCII digits, int64 range) and the
  optional second part is non-empty and made of `[A-Za-z0-9.-]`. So `v1.0.0`, `1.0` and `1.0.0+build`
  are *not* semantic there, and neither is `1.0.0-rc-1` (three parts);
- two semantic versions compare by major, minor, patch, then "no pre-release beats pre-release", then
  the pre-release strings byte by byte (not semver's identifier rules: `rc.10` < `rc.9`);
- two non-semantic versions compare by publish time;
- a semantic version beats a non-semantic one.

Folding that rule over the versions in publish order is what `latest_version` does. A tie (two
versions that compare equal) keeps the one published first. Versions published at the same instant
(a sync adds many at once; the official registry publishes one at a time) are folded in version-string
order, so the answer is deterministic.
"""

from __future__ import annotations

import re

_ATOI = re.compile(r"[+-]?[0-9]+")
_PRERELEASE = re.compile(r"[A-Za-z0-9.-]+")
_INT64 = 2**63


def _atoi(text: str) -> int | None:
    """Go's strconv.Atoi on a 64-bit platform: None where it returns an error."""
    if _ATOI.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None


def is_semantic_version(version: str) -> bool:
    parts = version.split("-")
    if len(parts) > 2:
        return False
    main = parts[0].split(".")
    if len(main) != 3 or any(_atoi(p) is None for p in main):
        return False
    return len(parts) == 1 or _PRERELEASE.fullmatch(parts[1]) is not None


def compare_semantic_versions(a: str, b: str) -> int:
    """-1, 0 or 1; both arguments must be semantic versions."""
    parts_a, parts_b = a.split("-"), b.split("-")
    nums_a = [_atoi(p) or 0 for p in parts_a[0].split(".")]
    nums_b = [_atoi(p) or 0 for p in parts_b[0].split(".")]
    for x, y in zip(nums_a, nums_b, strict=True):
        if x != y:
            return -1 if x < y else 1
    pre_a, pre_b = len(parts_a) > 1, len(parts_b) > 1
    if pre_a != pre_b:
        return -1 if pre_a else 1
    if pre_a:
        # Go compares strings bytewise; for the ASCII a pre-release may hold that is code-point order.
        if parts_a[1] != parts_b[1]:
            return -1 if parts_a[1] < parts_b[1] else 1
    return 0


def compare_versions(a: str, b: str, published_a: str, published_b: str) -> int:
    """The official comparison; timestamps are the store's fixed-width UTC strings (string order is
    time order)."""
    semver_a, semver_b = is_semantic_version(a), is_semantic_version(b)
    if semver_a and semver_b:
        return compare_semantic_versions(a, b)
    if not semver_a and not semver_b:
        return (published_a > published_b) - (published_a < published_b)
    return 1 if semver_a else -1


def latest_version(versions: list[tuple[str, str]]) -> str:
    """The latest of (version, published_at) pairs, as publishing them one by one in publish order
    would leave it on the official registry. `versions` must not be empty."""
    ordered = sorted(versions, key=lambda vp: (vp[1], vp[0]))
    best, best_at = ordered[0]
    for version, published in ordered[1:]:
        if compare_versions(version, best, published, best_at) > 0:
            best, best_at = version, published
    return best
