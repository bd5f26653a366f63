"""The publishing API of the upstream registry, for a private registry (see docs/registry.md).

Routes (also under `/v0`):
- `POST /v0.1/publish` — a server.json document becomes a new version;
- `PATCH /v0.1/servers/{serverName}/versions/{version}/status` and `PATCH /v0.1/servers/{serverName}/status`
  — `{status, statusMessage?}` for one version or every version of a name;
- `DELETE /v0.1/servers/{serverName}/versions/{version}` — the same as status `deleted` (the version
  stays, visible to `include_deleted` readers, and can never be published again);
- `PUT …/versions/{version}` — moderation: a token with an `edit` grant replaces that published
  version's content (the body passes the publish checks, same name and version; audited on the
  `mcpfleet.registry.audit` logger); a publisher gets 403: versions are immutable for publishers;
- `POST /v0.1/auth/oidc` (`{"oidc_token": ID token}`) and `POST /v0.1/auth/none` (with
  `publish.anonymousLogin` only) — the official registry's token exchange, which `mcp-publisher login`
  calls: the answer is `{"registry_token", "expires_at"}`, a registry token (`registry/tokens.py`)
  carrying the permissions the login grants. The official's other logins (`github-at`, `github-oidc`,
  `dns`, `http`) prove a public identity a private registry does not map: 404 naming `oidc`.

Every write needs a bearer token: a registry token of ours (its permissions are the ones it carries),
or a token of the configured OIDC issuer and audience carrying the publish scope (`publish.scope`, in
`scope` or `scp`). What the token may touch is the official registry's permission
model: a list of (action, pattern) where the action is `publish` or `edit` and a pattern is `*`, a
server name, or a prefix ending in `*` (the official `isResourceMatch`). The official registry derives
them from the login method (GitHub user → `io.github.<user>/*`, a proven domain → `com.example/*` and
`com.example.*`, its OIDC admins → configured patterns); a private issuer has no such proof, so the
config maps token claims to patterns (`publish.grants`), and `emailDomainNamespaces` adds the
domain rule for a verified email address.

Every failure is an `application/problem+json` answer naming the field (`errors[].location`):
401 (no or bad token, with `WWW-Authenticate`), 403 (no publish scope, namespace not granted), 413
(body over `publish.maxBodyBytes`), 415 (not JSON), 400 (unparsable JSON, duplicate version — the
official message, status already set), 422 (schema violation), 404 (nothing published under that name
or version), 409 (a synced source serves that name and ranks above published entries).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import importlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import orjson

from mcpfleet.api.mcpregistry import PublishGrant
from mcpfleet.auth.oidc import Authenticator, AuthError, make_authenticator
from mcpfleet.registry.api import WRITE_PREFIXES
from mcpfleet.registry.config import Publish
from mcpfleet.registry.entry import (
    PUBLISHED,
    STATUS_ACTIVE,
    STATUS_DELETED,
    STATUS_DEPRECATED,
    Entry,
)
from mcpfleet.registry.formats.upstream import validation_problem
from mcpfleet.registry.groupcommit import GroupCommit
from mcpfleet.registry.publishcheck import Problem, entry_of, read_json, send_answer
from mcpfleet.registry.tokens import (
    ANONYMOUS_PATTERN,
    ISSUER,
    MAX_PERMISSIONS,
    METHOD_NONE,
    METHOD_OIDC,
    RegistryTokenError,
    RegistryTokens,
    looks_like_registry_token,
)

if TYPE_CHECKING:
    from mcpfleet.registry.store import MergeStats

log = logging.getLogger(__name__)
audit = logging.getLogger("mcpfleet.registry.audit")
"""Moderation (a version's content replaced): one JSON line per change — who (`sub`, `iss`, `email`
of the token, never the token), what, and the content hashes before and after."""

_VERIFIED_SECONDS = 30.0
"""How long a verified token of the issuer is taken again without verifying it (never past its exp)."""
_VERIFIED_MAX = 1024

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

PUBLISH = "publish"
EDIT = "edit"
_STATUSES = (STATUS_ACTIVE, STATUS_DEPRECATED, STATUS_DELETED)
_MAX_STATUS_MESSAGE = 500
_MAX_EXCHANGE_BODY = 64 * 1024
"""Largest token-exchange body (`{"oidc_token": …}`; the token itself is at most 16 KiB)."""
_PUBLIC_LOGINS = ("github-at", "github-oidc", "dns", "http")
"""The official registry's logins that prove a public identity (a GitHub account, a domain)."""


def resource_match(resource: str, pattern: str) -> bool:
    """The official registry's `isResourceMatch`: `*`, a prefix ending in `*`, or the exact name."""
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return resource.startswith(pattern[:-1])
    return resource == pattern


def _claim_matches(claims: dict[str, Any], name: str, wanted: str) -> bool:
    """The claim is the string `wanted`, or an array holding it (`groups`, `roles`)."""
    value = claims.get(name)
    if isinstance(value, list):
        return wanted in value
    return isinstance(value, str) and value == wanted


def _email_domain_patterns(claims: dict[str, Any]) -> list[str]:
    """`alice@sub.acme.com` (verified) → `com.acme.sub/*`, `com.acme.sub.*`: the official rule for a
    domain proven by DNS (the namespace of the domain and of its subdomains)."""
    email = claims.get("email")
    if claims.get("email_verified") is not True or not isinstance(email, str) or email.count("@") != 1:
        return []
    domain = email.rsplit("@", 1)[1].lower().strip(".")
    labels = domain.split(".")
    if len(labels) < 2 or not all(labels) or not all(c.isalnum() or c == "-" for c in "".join(labels)):
        return []
    reverse = ".".join(reversed(labels))
    return [f"{reverse}/*", f"{reverse}.*"]


def permissions(config: Publish, claims: dict[str, Any]) -> list[tuple[str, str]]:
    """(action, pattern) pairs the token's claims grant."""
    out: list[tuple[str, str]] = []
    grant: PublishGrant
    for grant in config.grants:
        if all(_claim_matches(claims, k, v) for k, v in grant.claims.items()):
            out.extend((PUBLISH, p) for p in grant.publish)
            out.extend((EDIT, p) for p in grant.edit)
    if config.emailDomainNamespaces:
        out.extend((PUBLISH, p) for p in _email_domain_patterns(claims))
    return out


def has_scope(claims: dict[str, Any], scope: str) -> bool:
    """`scope` is in the token's `scope` (space-separated, RFC 8693) or `scp` (a list or a string)."""
    for value in (claims.get("scope"), claims.get("scp")):
        if isinstance(value, str) and scope in value.split():
            return True
        if isinstance(value, list) and scope in value:
            return True
    return False


def _allowed(perms: list[tuple[str, str]], name: str, actions: tuple[str, ...]) -> bool:
    return any(action in actions and resource_match(name, pattern) for action, pattern in perms)


def _route(raw_path: bytes) -> tuple[str, str | None, str | None]:
    """(route, server name, version) of a write path; route "unknown" when it is none of them."""
    path = raw_path.split(b"?", 1)[0]
    prefix = next(p for p in WRITE_PREFIXES if path.startswith(p))
    segments = [unquote(s.decode("latin-1"), errors="replace") for s in path[len(prefix) :].split(b"/")]
    if segments == ["publish"]:
        return "publish", None, None
    if len(segments) == 2 and segments[0] == "auth" and segments[1]:
        return "auth", segments[1], None
    if len(segments) < 3 or segments[0] != "servers":
        return "unknown", None, None
    rest = segments[1:]
    if "/" in rest[0]:
        name, rest = rest[0], rest[1:]
    else:
        name, rest = f"{rest[0]}/{rest[1]}", rest[2:]
    if rest == ["status"]:
        return "server-status", name, None
    if len(rest) == 2 and rest[0] == "versions" and rest[1]:
        return "version", name, rest[1]
    if len(rest) == 3 and rest[0] == "versions" and rest[1] and rest[2] == "status":
        return "version-status", name, rest[1]
    return "unknown", None, None


class Publisher:
    """Answers the write routes; `service` is the `RegistryService` (store, syncer lock, reload)."""

    def __init__(self, config: Publish, service: Any, authenticator: Authenticator | None = None) -> None:
        """`config.tokenSigningKeyFile`, when set, is read now (an absolute path: the service makes
        it so); a bad file raises `SigningKeyError`."""
        from pathlib import Path

        self.config = config
        self.service = service
        self.auth: Authenticator | None = authenticator or (
            make_authenticator(config.auth) if config.auth is not None else None
        )
        self._group: GroupCommit[MergeStats | None] = GroupCommit(self._write_batch)
        self._verified: OrderedDict[bytes, tuple[float, dict[str, Any]]] = OrderedDict()
        """SHA-256 of an issuer's token -> (until when, its verified claims): see `_verified_claims`."""
        key_file = config.tokenSigningKeyFile
        self.tokens = RegistryTokens.from_file(Path(key_file) if key_file is not None else None)

    async def warm(self) -> None:
        """Load, in a worker thread, what the first publish would otherwise load on the event loop:
        the JWT and HTTP stacks of token validation (`mcpfleet.auth.oidc` imports them on the first
        token) and the compiled server.json validator. Measured under load, the first publish after
        a start blocked the event loop — readers included — for 0.25-3.3 s doing that (the
        cold-start part of the publish p99). Started in the background, never awaited by a start."""
        try:
            modules = ("jwt", "jwt.algorithms") + (("aiohttp",) if self.config.auth is not None else ())
            await asyncio.to_thread(_import, *modules)
            await asyncio.to_thread(self.tokens.prepare)
            await asyncio.to_thread(validation_problem, {})
            # Long-lived like the snapshot: kept out of every full cyclic-GC pass (see `_install`).
            gc.freeze()
        except Exception:  # the first publish loads them itself (and reports what is wrong)
            log.exception("cannot preload the publishing API's modules")

    async def close(self) -> None:
        await self._group.close()
        close = getattr(self.auth, "close", None)
        if close is not None:
            await close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_answer(send, self._answer(scope, receive))

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[int, bytes]:
        raw: bytes = scope.get("raw_path") or scope["path"].encode()
        route, name, version = _route(raw)
        method = scope["method"]
        allowed = {
            "publish": "POST",
            "auth": "POST",
            "server-status": "PATCH",
            "version-status": "PATCH",
            "version": "DELETE",
        }.get(route)
        if allowed is None:
            raise Problem(404, "Not found")
        if method != allowed and not (route == "version" and method == "PUT"):
            extra = ", GET, HEAD, PUT" if route == "version" else ""
            raise Problem(405, "Method not allowed", headers=[(b"allow", (allowed + extra).encode())])
        if route == "auth":
            assert name is not None
            return 200, await self._exchange(name, scope, receive)
        claims, perms = await self._authenticate(scope)
        if method == "PUT":
            assert name is not None and version is not None
            return 200, await self._edit(name, version, await self._json(scope, receive), perms, claims)
        if route == "publish":
            entry = entry_of(await self._json(scope, receive))
            return 200, await self._publish(entry, perms)
        assert name is not None
        if route == "version":
            await self._drain(scope, receive)
            return 200, await self._status(name, version, (STATUS_DELETED, None), perms)
        wanted = self._status_request(await self._json(scope, receive))
        return 200, await self._status(name, version, wanted, perms, bulk=route == "server-status")

    # -- authentication and the request body

    async def _authenticate(self, scope: Scope) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The caller's claims and permissions: from a registry token of ours, else from a token of
        the configured issuer (its scope checked, its claims mapped by `publish.grants`)."""
        authorization = None
        for key, value in scope["headers"]:
            if key == b"authorization":
                authorization = value.decode("latin-1")
                break
        scheme, _, bearer = (authorization or "").partition(" ")
        bearer = bearer.strip()
        if scheme.lower() == "bearer" and looks_like_registry_token(bearer):
            try:
                identity = self.tokens.verify(bearer)
            except RegistryTokenError as exc:
                raise self._unauthorized(f"registry token: {exc}", str(exc)) from None
            claims = {"sub": identity.subject, "iss": ISSUER, "auth_method": identity.method}
            return claims, identity.permissions
        if self.auth is None:
            raise self._unauthorized(
                "this registry accepts only its own registry tokens: log in first "
                "(mcp-publisher login none --registry URL)",
                "a registry token is required",
            )
        claims = await self._verified_claims(authorization)
        if self.config.scope is not None and not has_scope(claims, self.config.scope):
            challenge = f'Bearer error="insufficient_scope", scope="{self.config.scope}"'.encode()
            raise Problem(
                403,
                f"The token lacks the scope {self.config.scope!r} publishing needs",
                "header.Authorization",
                headers=[(b"www-authenticate", challenge)],
            )
        return claims, permissions(self.config, claims)

    async def _verified_claims(self, authorization: str | None) -> dict[str, Any]:
        """The claims of the issuer's token, verified — or remembered from its verification in the
        last `_VERIFIED_SECONDS` and not expired since (a publisher sends the same token with
        every publish; verifying it was ~40 % of the request handler's CPU, measured). Tokens checked by
        introspection are not remembered: asking the issuer each time is how a revocation is seen."""
        assert self.auth is not None
        key = hashlib.sha256((authorization or "").encode()).digest()  # (no token kept in memory)
        now = time.time()
        known = self._verified.get(key)
        if known is not None and now < known[0]:
            return known[1]
        try:
            verified = await self.auth.authenticate(authorization)
        except AuthError as exc:
            raise self._unauthorized(str(exc) or "a bearer token is required", str(exc) or None) from None
        claims = verified or {}
        exp = claims.get("exp")
        introspected = getattr(getattr(self.auth, "cfg", None), "introspection_url", None)
        if isinstance(exp, int | float) and not isinstance(exp, bool) and not introspected:
            self._verified[key] = (min(float(exp), now + _VERIFIED_SECONDS), claims)
            while len(self._verified) > _VERIFIED_MAX:
                self._verified.popitem(last=False)
        return claims

    def _unauthorized(self, message: str, error: str | None) -> Problem:
        challenge = (self.auth.challenge(error) if self.auth is not None else _challenge(error)).encode(
            "latin-1", "replace"
        )
        return Problem(
            401,
            f"Invalid or missing token: {message}",
            "header.Authorization",
            headers=[(b"www-authenticate", challenge)],
        )

    # -- the token exchange (`mcp-publisher login`)

    async def _exchange(self, method: str, scope: Scope, receive: Receive) -> bytes:
        """`POST /v0.1/auth/{method}`: a registry token for a proof of identity (see `tokens.py`)."""
        if method == METHOD_NONE:
            if not self.config.anonymousLogin:
                raise Problem(
                    404,
                    "Not found: anonymous login (mcp-publisher login none) is off on this registry "
                    "(publish.anonymousLogin)",
                    "path.method",
                    method,
                )
            await self._drain(scope, receive)
            perms = [("publish", ANONYMOUS_PATTERN), ("edit", ANONYMOUS_PATTERN)]
            return self._token_answer(METHOD_NONE, "anonymous", perms)
        if method == METHOD_OIDC:
            if self.auth is None:
                raise Problem(
                    404,
                    "Not found: this registry has no OIDC issuer to exchange ID tokens of (publish.auth)",
                    "path.method",
                    method,
                )
            claims = await self._id_token_claims(scope, receive, self.auth)
            perms = list(dict.fromkeys(permissions(self.config, claims)))
            if not perms:
                raise Problem(
                    403,
                    "The ID token is valid, but no publish.grants entry matches its claims: it may "
                    "publish nothing here",
                    "body.oidc_token",
                )
            if len(perms) > MAX_PERMISSIONS:
                raise Problem(
                    403,
                    f"The grants matching this ID token name {len(perms)} (action, pattern) pairs, more "
                    f"than the {MAX_PERMISSIONS} a registry token carries",
                    "body.oidc_token",
                )
            subject = claims.get("sub")
            return self._token_answer(METHOD_OIDC, subject if isinstance(subject, str) else "", perms)
        if method in _PUBLIC_LOGINS:
            raise Problem(
                404,
                f"Not found: this private registry does not issue tokens through {method} (a public "
                "GitHub or domain identity); exchange an ID token of its issuer at auth/oidc",
                "path.method",
                method,
            )
        raise Problem(404, "Not found")

    async def _id_token_claims(self, scope: Scope, receive: Receive, auth: Authenticator) -> dict[str, Any]:
        """The claims of the body's `oidc_token`, verified as the configured issuer's token for our
        audience (signature, issuer, audience, time window). No scope is asked of it: an ID token
        names a person, and the grants decide what that person may publish."""
        body = await read_json(scope, receive, _MAX_EXCHANGE_BODY)
        if not isinstance(body, dict):
            raise Problem(422, "Expected an object {oidc_token}", "body")
        unknown = sorted(set(body) - {"oidc_token"})
        if unknown:
            raise Problem(422, f"Unknown field {unknown[0]!r}", f"body.{unknown[0]}")
        token = body.get("oidc_token")
        if not isinstance(token, str) or not token.strip():
            raise Problem(
                422, "oidc_token is required: an ID token of this registry's issuer", "body.oidc_token"
            )
        try:
            claims = await auth.authenticate("Bearer " + token.strip())
        except AuthError as exc:
            raise Problem(
                401, f"Token exchange failed: {str(exc) or 'invalid token'}", "body.oidc_token"
            ) from None
        return claims or {}

    def _token_answer(self, method: str, subject: str, perms: list[tuple[str, str]]) -> bytes:
        token, expires_at = self.tokens.issue(method, subject, perms)
        log.info("registry token (%s login) issued to %r for %d permissions", method, subject, len(perms))
        return orjson.dumps({"registry_token": token, "expires_at": expires_at})

    async def _json(self, scope: Scope, receive: Receive) -> Any:
        return await read_json(scope, receive, self.config.maxBodyBytes)

    async def _drain(self, scope: Scope, receive: Receive) -> None:
        """Read and ignore a body (DELETE carries none), within the size limit."""
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if size > self.config.maxBodyBytes or not message.get("more_body"):
                return

    def _status_request(self, body: Any) -> tuple[str, str | None]:
        if not isinstance(body, dict):
            raise Problem(422, "Expected an object {status, statusMessage}", "body")
        unknown = sorted(set(body) - {"status", "statusMessage"})
        if unknown:
            raise Problem(422, f"Unknown field {unknown[0]!r}", f"body.{unknown[0]}", body[unknown[0]])
        status = body.get("status")
        if status not in _STATUSES:
            raise Problem(422, f"status must be one of {', '.join(_STATUSES)}", "body.status", status)
        message = body.get("statusMessage")
        if message is not None and (not isinstance(message, str) or len(message) > _MAX_STATUS_MESSAGE):
            raise Problem(
                422,
                f"statusMessage must be a string of at most {_MAX_STATUS_MESSAGE} characters",
                "body.statusMessage",
            )
        if status == STATUS_ACTIVE and message is not None:
            # The official rule: a message explains a deprecation or a deletion, never an active version.
            raise Problem(
                422, "statusMessage is only for deprecated or deleted versions", "body.statusMessage", message
            )
        return str(status), message

    # -- the operations

    def _forbidden(self, name: str, perms: list[tuple[str, str]], actions: tuple[str, ...]) -> Problem:
        mine = [p for a, p in perms if a in actions]
        held = ", ".join(mine) if mine else "none"
        verb = "publish" if actions == (PUBLISH,) else "publish or edit"
        return Problem(
            403,
            f"You do not have permission to {verb} this server. You have permission to {verb}: {held}. "
            f"Attempting to {verb}: {name}",
            "body.name" if actions == (PUBLISH,) else "path.serverName",
            name,
        )

    async def _publish(self, entry: Entry, perms: list[tuple[str, str]]) -> bytes:
        if not _allowed(perms, entry.name, (PUBLISH,)):
            raise self._forbidden(entry.name, perms, (PUBLISH,))
        if self.config.precedence == "last":
            stats = await self._publish_alone(entry)
        else:
            # Written with the publishes that arrive meanwhile (one batch: see groupcommit).
            stats = await self._group.submit(entry)
        if stats is None:
            raise Problem(
                400,
                "invalid version: cannot publish duplicate version",
                "body.version",
                entry.version,
            )
        log.info("published %s %s", entry.name, entry.version)
        return self._response(entry.name, entry.version)

    async def _publish_alone(self, entry: Entry) -> MergeStats | None:
        """A publish where a synced source's name is refused (precedence `last`): that check and
        the write under one hold of the write lock, not batched."""
        service = self.service
        async with service.syncer.write_lock:
            owners = {src for _v, src, _status in await service.store.served(entry.name)}
            owners -= {PUBLISHED}
            if owners:
                raise Problem(
                    409,
                    f"{entry.name} is served by the synced source {sorted(owners)[0]!r}, which ranks "
                    "above published entries (publish.precedence: last)",
                    "body.name",
                    entry.name,
                )
            stats: MergeStats | None = await service.store.publish(entry, service.syncer.merge_order)
            if stats is not None:
                assert stats.rows is not None
                await service.refresh(entry.name, (stats.generation, stats.rows))
            return stats

    async def _write_batch(self, entries: list[Entry]) -> list[MergeStats | None]:
        """Write a batch of publishes (distinct names) and serve them, under the write lock."""
        service = self.service
        async with service.syncer.write_lock:
            results: list[MergeStats | None] = await service.store.publish_many(
                entries, service.syncer.merge_order
            )
            written = [(stats, entry) for entry, stats in zip(entries, results, strict=True) if stats]
            # In the order they were written: each the catalogue's next generation (see `refresh`).
            for stats, entry in sorted(written, key=lambda pair: pair[0].generation):
                assert stats.rows is not None
                await service.refresh(entry.name, (stats.generation, stats.rows))
        return results

    async def _status(
        self,
        name: str,
        version: str | None,
        wanted: tuple[str, str | None],
        perms: list[tuple[str, str]],
        bulk: bool = False,
    ) -> bytes:
        status, message = wanted
        if not _allowed(perms, name, (PUBLISH, EDIT)):
            raise self._forbidden(name, perms, (PUBLISH, EDIT))
        service = self.service
        async with service.syncer.write_lock:
            changed = await service.store.set_published_status(
                name, None if bulk else version, status, message, service.syncer.merge_order
            )
            if changed is None:
                owners = {src for v, src, _s in await service.store.served(name) if bulk or v == version}
                if owners:
                    raise Problem(
                        409,
                        f"{name} comes from the synced source {sorted(owners)[0]!r}: change its status there",
                        "path.serverName",
                        name,
                    )
                what = "Server not found" if bulk else "Server version not found"
                raise Problem(404, what, "path.version" if not bulk else "path.serverName")
            if not changed and not bulk:
                raise Problem(400, f"No changes to apply: status is already {status}", "body.status", status)
            if changed:
                await service.refresh(name)
        log.info("status of %s %s set to %s", name, version or "(all versions)", status)
        if not bulk:
            assert version is not None
            return self._response(name, version)
        catalogue = service.current()
        bodies = [item.body for item in catalogue.by_name.get(name, ()) if item.version in set(changed)]
        return b'{"updatedCount":' + str(len(changed)).encode() + b',"servers":[' + b",".join(bodies) + b"]}"

    async def _edit(
        self, name: str, version: str, document: Any, perms: list[tuple[str, str]], claims: dict[str, Any]
    ) -> bytes:
        """`PUT …/versions/{version}`: a moderator (an `edit` grant) replaces a published version's
        content, as on the official registry; publishers cannot (versions are immutable for them).
        The body passes the publish checks and must name the same server and version. Audited."""
        if not _allowed(perms, name, (EDIT,)):
            mine = ", ".join(p for a, p in perms if a == EDIT) or "none"
            raise Problem(
                403,
                "Published versions are immutable: only an edit (moderation) grant may replace one; "
                f"you may edit: {mine}. Publish a new version instead",
                "path.serverName",
                name,
            )
        entry = entry_of(document)
        for field, wanted, got in (("name", name, entry.name), ("version", version, entry.version)):
            if got != wanted:
                raise Problem(
                    422, f"The body's {field} must be the path's ({wanted!r})", f"body.{field}", got
                )
        service = self.service
        async with service.syncer.write_lock:
            replaced = await service.store.replace_published(entry, service.syncer.merge_order)
            if replaced is None:
                owners = {src for v, src, _s in await service.store.served(name) if v == version}
                if owners:
                    raise Problem(
                        409,
                        f"{name} {version} comes from the synced source {sorted(owners)[0]!r}: edit it there",
                        "path.version",
                        version,
                    )
                raise Problem(404, "Server version not found", "path.version", version)
            previous, digest, stats = replaced
            assert stats.rows is not None
            await service.refresh(name, (stats.generation, stats.rows))
        audit.warning(
            "%s",
            orjson.dumps(
                {
                    "action": "edit_version",
                    "subject": {k: v for k in ("sub", "iss", "email") if isinstance(v := claims.get(k), str)},
                    "name": name,
                    "version": version,
                    "previousContentHash": previous,
                    "contentHash": digest,
                }
            ).decode(),
        )
        return self._response(name, version)

    def _response(self, name: str, version: str) -> bytes:
        page = self.service.current().get(name, version, True)
        if page is None:  # the entry was taken over by a higher-ranking source in the same instant
            raise Problem(409, f"{name} {version} is not served: a higher-ranking source took the name")
        body: bytes = page.body
        return body


def _challenge(error: str | None) -> str:
    """`WWW-Authenticate` for a registry without an external issuer (registry tokens only)."""
    if not error:
        return 'Bearer realm="mcp-registry"'
    cleaned = "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in error)[:300]
    return f'Bearer realm="mcp-registry", error="invalid_token", error_description="{cleaned}"'


def _import(*modules: str) -> None:
    for module in modules:
        importlib.import_module(module)
