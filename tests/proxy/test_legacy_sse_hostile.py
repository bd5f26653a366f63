"""Hostile suite of the legacy HTTP+SSE transport's session binding (`auth.binding`, `auth.asgi`).

Two authenticated subjects: Alice opens a stream, Bob (a valid token of his own) tries every
spelling of her session that the MCP SDK's `SseServerTransport` would route to her stream. The
corpus runs against a real proxy (`--transport sse` behind OIDC); the property tests drive the
guard in process, in front of a probe that routes exactly as the SDK transport does (Starlette's
query parsing, last value, `UUID(hex=...)`), and check the guard's reading against the SDK's.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from mcpfleet.auth.asgi import AuthGuard
from mcpfleet.auth.binding import AmbiguousSession, query_session, subject_of
from mcpfleet.auth.oidc import AuthError, IncomingAuthSettings
from mcpfleet.policy.asgi import PolicyMiddleware
from mcpfleet.policy.config import parse_document
from mcpfleet.policy.engine import PolicyEngine
from mcpfleet.policy.guard import Policy
from mcpfleet.proxy.serve import build_stdio_app, with_auth
from tests.conformance import harness
from tests.mcp_messages import initialize_request
from tests.proxy.conftest import serve_app
from tests.proxy.test_auth import AUDIENCE, local_issuer, oidc_auth

JSON = {"content-type": "application/json"}


class Stream:
    """An open `GET /sse` stream: its endpoint URL and the JSON-RPC ids of the answers it carried."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.endpoint = ""
        self.ids: list[Any] = []

    async def read_endpoint(self) -> str:
        async for raw in self.response.content:
            line = raw.decode().strip()
            if line.startswith("data:"):
                self.endpoint = line.removeprefix("data:").strip()
                return self.endpoint
        raise AssertionError("the stream ended before its endpoint event")

    async def read_until(self, request_id: Any) -> None:
        """Collect answer ids until `request_id`'s answer arrives (a generous minute: loaded CI)."""
        async with asyncio.timeout(60):
            async for raw in self.response.content:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    message = orjson.loads(line.removeprefix("data:"))
                    self.ids.append(message.get("id"))
                    if message.get("id") == request_id:
                        return
        raise AssertionError(f"the stream ended before the answer to {request_id!r}")


@contextlib.asynccontextmanager
async def open_stream(
    http: aiohttp.ClientSession, base: str, headers: dict[str, str]
) -> AsyncIterator[Stream]:
    async with http.get(f"{base}/sse", headers=headers) as response:
        assert response.status == 200
        stream = Stream(response)
        await stream.read_endpoint()
        yield stream


def ping(request_id: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"})


def spellings(victim: uuid.UUID) -> dict[str, tuple[str, int]]:
    """Query strings naming `victim`'s session (or naming it ambiguously): the status Bob gets."""
    h = victim.hex
    return {
        "upper case": (f"session_id={h.upper()}", 404),
        "braces": (f"session_id={{{h}}}", 404),
        "urn:uuid": (f"session_id=urn:uuid:{victim}", 404),
        "dashed": (f"session_id={victim}", 404),
        "percent-encoded value": ("session_id=" + "".join(f"%{ord(c):02X}" for c in h), 404),
        "percent-encoded name": (f"session%5Fid={h}", 404),
        "odd dashes": (f"session_id={h[:8].upper()}-{h[8:]}-", 404),
        "bogus then victim": (f"session_id=bogus&session_id={h}", 400),
        "victim then bogus": (f"session_id={h}&session_id=bogus", 400),
        "victim twice": (f"session_id={h}&session_id={h}", 400),
        "unknown uuid": (f"session_id={uuid.uuid4().hex}", 404),
        "not a uuid": ("session_id=not-a-session", 404),
        "empty": ("session_id=", 404),
    }


async def test_another_subject_cannot_post_into_a_legacy_sse_session_by_any_spelling() -> None:
    """Regression (issue 27 item 7): before the fix the guard read the first `session_id` and passed
    ids it did not know, so upper case, braces, `urn:uuid:`, a percent-encoded name, a repeated
    parameter, or Bob's own session in `Mcp-Session-Id` reached Alice's stream (202)."""
    async with local_issuer() as issuer:
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1", transport="sse")
        alice = {"authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE, sub="alice")}
        bob = {"authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE, sub="bob")}
        async with (
            serve_app(with_auth(app, oidc_auth(issuer), mcp_path="/sse")) as base,
            aiohttp.ClientSession() as http,
            open_stream(http, base, alice) as victim,
            open_stream(http, base, bob) as own,
        ):
            sid = uuid.UUID(hex=victim.endpoint.partition("session_id=")[2])
            async with http.post(
                base + victim.endpoint, data=orjson.dumps(initialize_request()), headers={**alice, **JSON}
            ) as r:
                assert r.status == 202
            await victim.read_until(1)
            refusals: list[tuple[str, int, str]] = []
            for why, (query, status) in spellings(sid).items():
                async with http.post(
                    f"{base}/messages/?{query}", data=ping(f"bob-{why}"), headers={**bob, **JSON}
                ) as r:
                    error = (await r.json())["error"]
                    refusals.append((why, r.status, error["message"]))
                    assert r.status == status, (why, r.status, error)
                    if status == 400:
                        assert "session_id" in error["message"], why
            # Bob's own stream in the header, Alice's in the query: the query is what routes.
            bobs_sid = own.endpoint.partition("session_id=")[2]
            headers = {**bob, **JSON, "mcp-session-id": bobs_sid}
            async with http.post(
                f"{base}/messages/?session_id={sid.hex}", data=ping("bob-header"), headers=headers
            ) as r:
                assert r.status == 404
            twice = [*headers.items(), ("Mcp-Session-Id", bobs_sid)]  # aiohttp would merge the two
            async with httpx.AsyncClient() as raw:
                r2 = await raw.post(base + own.endpoint, content=ping("bob-two"), headers=twice)
                assert r2.status_code == 400 and "Mcp-Session-Id" in r2.json()["error"]["message"]
            # Alice's own spellings still reach her stream (the transport reads them as her session).
            for i, query in enumerate((f"session_id={sid.hex.upper()}", f"session_id={{{sid}}}")):
                async with http.post(
                    f"{base}/messages/?{query}", data=ping(f"alice-{i}"), headers={**alice, **JSON}
                ) as r:
                    assert r.status == 202, query
            await victim.read_until("alice-1")
            assert not [i for i in victim.ids if isinstance(i, str) and i.startswith("bob-")], victim.ids
            assert "alice-0" in victim.ids


# --- In process: the guard in front of a probe routing exactly as the SDK transport does. -------

VICTIM = uuid.UUID("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
ALICE = {"iss": "t", "sub": "alice"}
BOB = {"iss": "t", "sub": "bob"}


class Tokens:
    """Bearer `alice` / `bob`: an authenticator that needs no issuer."""

    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        claims = {"Bearer alice": ALICE, "Bearer bob": BOB}.get(authorization or "")
        if claims is None:
            raise AuthError("unknown token")
        return claims

    def challenge(self, error: str | None, resource_metadata: str | None = None) -> str:
        return "Bearer"


def sdk_route(query: bytes) -> uuid.UUID | None:
    """The session `SseServerTransport.handle_post_message` routes a POST with this query to."""
    value = Request({"type": "http", "query_string": query, "headers": []}).query_params.get("session_id")
    if value is None:
        return None
    try:
        return uuid.UUID(hex=value)
    except ValueError:
        return None


def guarded_probe() -> tuple[AuthGuard, list[uuid.UUID | None]]:
    reached: list[uuid.UUID | None] = []

    async def probe(scope: Any, receive: Any, send: Any) -> None:
        reached.append(sdk_route(scope.get("query_string", b"")))
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"Accepted"})

    guard = AuthGuard(
        probe, IncomingAuthSettings.model_validate({"type": "anonymous"}), authenticator=Tokens()
    )
    guard.bindings.bind(VICTIM.hex, subject_of(ALICE, None))
    return guard, reached


async def post(guard: AuthGuard, who: str, query: bytes) -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {who}".encode()), (b"content-type", b"application/json")]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/messages/",
        "query_string": query,
        "headers": headers,
    }
    await guard(scope, receive, send)
    return int(sent[0]["status"])


def _case(text: str, flips: list[bool]) -> str:
    return "".join(
        c.upper() if flip else c for c, flip in zip(text, flips + [False] * len(text), strict=False)
    )


@st.composite
def victim_spelling(draw: st.DrawFn) -> str:
    """A value `UUID(hex=...)` reads as VICTIM: any case, dashes anywhere, braces, `urn:` / `uuid:`."""
    digits = list(VICTIM.hex)
    for _ in range(draw(st.integers(0, 6))):
        digits.insert(draw(st.integers(0, len(digits))), "-")
    text = _case("".join(digits), draw(st.lists(st.booleans(), max_size=40)))
    text = draw(st.sampled_from(["", "{", "{{"])) + text + draw(st.sampled_from(["", "}", "}}"]))
    return draw(st.sampled_from(["", "urn:", "uuid:", "urn:uuid:", "uuid:urn:"])) + text


def _encode(text: str, draw: Callable[[st.SearchStrategy[list[bool]]], list[bool]]) -> str:
    """`text` with some characters percent-encoded (as a client may send them)."""
    flags = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(
        f"%{ord(c):02X}" if flag and c.isascii() else c for c, flag in zip(text, flags, strict=True)
    )


@st.composite
def hostile_query(draw: st.DrawFn) -> bytes:
    """A query of 1-4 parameters: `session_id` (names spelled or percent-encoded) with victim
    spellings, other sessions and garbage, plus unrelated parameters."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(["session_id", "session%5Fid", "%73ession_id", "Session_id", "sid", "x"]))
        value = draw(
            st.one_of(
                victim_spelling(),
                st.just(uuid.uuid4().hex),
                st.text(st.characters(codec="ascii", exclude_characters="&#"), max_size=40),
            )
        )
        parts.append(f"{name}={_encode(value, draw)}")
    return "&".join(parts).encode("latin-1")


@settings(max_examples=200, deadline=None)
@given(query=hostile_query())
def test_bob_never_reaches_alices_session(query: bytes) -> None:
    """Whatever the query, Bob's POST never reaches the session the SDK would route to Alice's, and
    the refusal is a clear 400 / 404, never a 5xx."""

    async def run() -> None:
        guard, reached = guarded_probe()
        status = await post(guard, "bob", query)
        assert status in (202, 400, 404), status
        assert VICTIM not in reached
        if status == 202:
            assert sdk_route(query) is None  # only a POST that names no session passes (the SDK answers 400)

    asyncio.run(run())


@settings(max_examples=200, deadline=None)
@given(value=victim_spelling(), data=st.data())
def test_every_spelling_the_transport_routes_to_alice_is_hers(value: str, data: st.DataObject) -> None:
    """The guard reads a single `session_id` as the SDK does: Alice passes with every spelling of
    her session, Bob is refused with each of them."""
    query = f"session_id={_encode(value, data.draw)}".encode()
    assert sdk_route(query) == VICTIM and query_session(query) == VICTIM.hex

    async def run() -> None:
        guard, reached = guarded_probe()
        assert await post(guard, "alice", query) == 202
        assert await post(guard, "bob", query) == 404
        assert reached == [VICTIM]

    asyncio.run(run())


@settings(max_examples=200, deadline=None)
@given(query=hostile_query())
def test_query_session_agrees_with_the_sdk(query: bytes) -> None:
    """`query_session` is the SDK's reading (canonical hex), or a refusal when the name repeats."""
    try:
        mine = query_session(query)
    except AmbiguousSession as exc:
        assert str(exc) == "query parameter session_id given more than once"
        return
    routed = sdk_route(query)
    if routed is not None:
        assert mine == routed.hex
    else:
        assert mine is None or mine != VICTIM.hex


def test_ambiguous_session_names_the_parameter() -> None:
    with pytest.raises(AmbiguousSession, match="query parameter session_id"):
        query_session(b"session_id=a&session%5Fid=b")


# --- The policy layer pairs POSTs with streams as the transport routes them. --------------------


async def test_the_policy_layer_pairs_every_spelling_and_authorizes_any_message_path() -> None:
    """Lists POSTed with another spelling of the session pair with its stream (they were refused as
    unpaired); a repeated `session_id` pairs with nothing; and a POST to the message path an endpoint
    named (a remote server's own, not `/messages/`) is authorized whatever its query - before, a
    spelling the layer did not know went to the server unchecked."""
    engine = PolicyEngine(
        parse_document(
            {
                "version": "1.0",
                "type": "cedarv1",
                "cedar": {
                    "policies": ['permit(principal, action == Action::"call_tool", resource == Tool::"ok");']
                },
            },
            "test",
        )
    )
    reached: list[bytes] = []
    hold, announced = asyncio.Event(), asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] == "GET":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            endpoint = f"event: endpoint\ndata: /rpc/in?session_id={VICTIM.hex}\n\n".encode()
            await send({"type": "http.response.body", "body": endpoint, "more_body": True})
            announced.set()
            await hold.wait()  # a live stream
            return
        reached.append(scope["query_string"])
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"Accepted"})

    mw = PolicyMiddleware(app, Policy(engine=engine))
    assert mw.legacy is not None
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def nothing() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    get = {"type": "http", "method": "GET", "path": "/sse", "query_string": b"", "headers": []}
    stream = asyncio.create_task(mw(get, nothing, send))
    await asyncio.wait_for(announced.wait(), 60)
    for spelling in (VICTIM.hex.upper(), f"{{{VICTIM}}}", f"urn:uuid:{VICTIM}"):
        query = f"session_id={spelling}".encode()
        assert mw.legacy.knows(query), spelling
        assert mw.legacy.expect(query, 1, "tools/list", None) is None, spelling
    assert mw.legacy.expect(f"session_id=x&session_id={VICTIM.hex}".encode(), 2, "tools/list", None)
    assert mw.legacy.is_message_path("/rpc/in") and not mw.legacy.is_message_path("/rpc/other")

    async def call(query: bytes, tool: str) -> int:
        body = orjson.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": tool}})
        done: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def out(message: dict[str, Any]) -> None:
            done.append(message)

        scope = {"type": "http", "method": "POST", "path": "/rpc/in", "query_string": query, "headers": []}
        await mw(scope, receive, out)
        return int(done[0]["status"])

    await call(b"session_id=not-known", "denied")
    await call(f"session_id={VICTIM.hex.upper()}".encode(), "denied")
    assert reached == []  # both denied by the policy, whatever the query
    assert await call(b"session_id=not-known", "ok") == 202 and reached == [b"session_id=not-known"]
    hold.set()
    await stream
    assert not mw.legacy.is_message_path("/rpc/in")  # closed with its stream


async def test_a_repeated_session_id_is_refused_without_auth_too() -> None:
    """Anonymous proxy (no subjects, nothing to bind): the transport itself refuses a repeated
    `session_id` with a 400 naming it, rather than routing the last value."""
    app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1", transport="sse")
    async with serve_app(app) as base, aiohttp.ClientSession() as http, open_stream(http, base, {}) as stream:
        sid = stream.endpoint.partition("session_id=")[2]
        for query in (f"session_id=x&session_id={sid}", f"session_id={sid}&session%5Fid={sid}"):
            async with http.post(f"{base}/messages/?{query}", data=ping("p"), headers=JSON) as r:
                assert r.status == 400, query
                assert (await r.json())["error"][
                    "message"
                ] == "Bad request: query parameter session_id given more than once"
        async with http.post(
            base + stream.endpoint, data=orjson.dumps(initialize_request()), headers=JSON
        ) as r:
            assert r.status == 202
