"""Redaction of credentials carried in URLs, for everything that shows a URL to someone.

A remote MCP server's URL may hold credentials: `https://user:pw@host/mcp`, `?api_key=...`,
`?token=...`. Whatever shows such a URL - the proxy's unauthenticated `/health`, log lines, error
messages, status and the run config - shows `redact_url(url)` instead: the userinfo, every query
value (a query parameter of any name may be a token) and the fragment become `***`; scheme, host,
port and path stay so the URL is still recognisable (a secret in the path cannot be told apart). `redact_text` does the same for every URL inside free text (an
exception message, a command line).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_URL = re.compile(r"(?:https?|wss?)://[^\s'\"<>]+", re.IGNORECASE)


def redact_url(url: str) -> str:
    """`url` with its userinfo, query values and fragment masked (unchanged when it has none)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        # Not parseable (e.g. a broken IPv6 literal): mask everything after the scheme.
        scheme, sep, _ = url.partition("://")
        return f"{scheme}{sep}{MASK}" if sep else MASK
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{name}={MASK}" if sep else MASK  # a bare item may be the token itself
        for name, sep, _ in (item.partition("=") for item in parts.query.split("&") if item)
    )
    fragment = MASK if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def redact_text(text: str) -> str:
    """`text` with every http(s)/ws(s) URL in it redacted."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text)
