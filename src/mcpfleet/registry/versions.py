"""Which version of a server is the latest: the official registry's rules (issue 32 items 2-4).

The official registry decides `isLatest` with the semantic-version rules of Go modules
(`golang.org/x/mod/semver`, after adding a `v` to a version without one):

- a version is "semantic" when `v` + it (or it, when it starts with `v`) is `vMAJOR[.MINOR[.PATCH
  [-PRERELEASE][+BUILD]]]`: numbers without leading zeros, dot-separated pre-release identifiers of
  `[0-9A-Za-z-]` (numeric ones without leading zeros), build identifiers of the same characters
  (leading zeros allowed); `v1` and `v1.2` are short for `v1.0.0` and `v1.2.0` (and take no suffix).
  So `v1.0.0`, `1.0.0+build1`, `1.0.0-rc-1` are semantic; `01.0.0`, `1.0.0-alpha.01` are not;
- two semantic versions compare by major, minor, patch, then "no pre-release beats pre-release",
  then the pre-release identifiers left to right (numeric ones as numbers and below alphanumeric
  ones, which compare as ASCII; more identifiers win a tie: `rc.10` > `rc.9`); build is ignored;
- two non-semantic versions compare by publish time;
- a semantic version beats a non-semantic one.

Folding that rule over the versions in publish order is what `latest_version` does. A tie (two
versions that compare equal) keeps the one published first. Deleted versions never are the latest
while another version is not deleted (deleting the latest, or undeleting one, recalculates it).
"""

from __future__ import annotations

import re

_NUMBER = r"(0|[1-9][0-9]*)"
_IDENT = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
# The suffixes sit inside the patch group: a short form (`v1`, `v1.2`) takes none.
_SEMVER = re.compile(
    rf"v{_NUMBER}(?:\.{_NUMBER}(?:\.{_NUMBER}(?:-({_IDENT}(?:\.{_IDENT})*))?(?:\+{_BUILD})?)?)?"
)

Number = tuple[int, str]
"""A number as Go's semver compares it: by length, then as a string (never converted: no size limit)."""
Parsed = tuple[Number, Number, Number, tuple[str, ...] | None]
"""(major, minor, patch, pre-release identifiers or None for a release)."""


def _number(text: str | None) -> Number:
    return (1, "0") if text is None else (len(text), text)


def parse_semantic(version: str) -> Parsed | None:
    """The Go module semver reading of `version` (a `v` added when missing), None if not semantic."""
    text = version if version.startswith("v") else "v" + version
    match = _SEMVER.fullmatch(text)
    if match is None:
        return None
    pre = match.group(4)
    numbers = _number(match.group(1)), _number(match.group(2)), _number(match.group(3))
    return (*numbers, tuple(pre.split(".")) if pre is not None else None)


def is_semantic_version(version: str) -> bool:
    return parse_semantic(version) is not None


def _compare_identifiers(a: str, b: str) -> int:
    a_num, b_num = a.isdigit(), b.isdigit()
    if a_num != b_num:
        return -1 if a_num else 1  # numeric identifiers rank below alphanumeric ones
    x, y = (_number(a), _number(b)) if a_num else ((0, a), (0, b))
    return (x > y) - (x < y)


def _compare_parsed(a: Parsed, b: Parsed) -> int:
    if a[:3] != b[:3]:
        return -1 if a[:3] < b[:3] else 1
    pre_a, pre_b = a[3], b[3]
    if pre_a is None or pre_b is None:
        return (pre_a is None) - (pre_b is None)
    for x, y in zip(pre_a, pre_b, strict=False):
        found = _compare_identifiers(x, y)
        if found:
            return found
    return (len(pre_a) > len(pre_b)) - (len(pre_a) < len(pre_b))


def compare_semantic_versions(a: str, b: str) -> int:
    """-1, 0 or 1; both arguments must be semantic versions."""
    parsed_a, parsed_b = parse_semantic(a), parse_semantic(b)
    assert parsed_a is not None and parsed_b is not None, (a, b)
    return _compare_parsed(parsed_a, parsed_b)


def compare_versions(a: str, b: str, published_a: str, published_b: str) -> int:
    """The official comparison; timestamps are the store's fixed-width UTC strings (string order is
    time order)."""
    parsed_a, parsed_b = parse_semantic(a), parse_semantic(b)
    if parsed_a is not None and parsed_b is not None:
        return _compare_parsed(parsed_a, parsed_b)
    if parsed_a is None and parsed_b is None:
        return (published_a > published_b) - (published_a < published_b)
    return 1 if parsed_a is not None else -1


def latest_version(versions: list[tuple[str, str]]) -> str:
    """The latest of (version, published_at) pairs, as publishing them one by one in publish order
    would leave it on the official registry. `versions` must not be empty."""
    ordered = sorted(versions, key=lambda vp: (vp[1], vp[0]))
    best, best_at = ordered[0]
    for version, published in ordered[1:]:
        if compare_versions(version, best, published, best_at) > 0:
            best, best_at = version, published
    return best
