"""Hostile-input helpers shared by the proxy and vMCP suites: a real HTTP server in a thread,
raw POSTs in both protocol eras, the hypothesis strategies of the JSON-RPC fuzz suites and the
checks every hostile answer must pass (no 5xx, no traceback, the service still answers).

Servers run under uvicorn exactly as the CLIs run them (`BodyLimits` + `uvicorn_options`), on a
loop in a background thread, so hypothesis drives them with plain blocking HTTP (it does not run
async tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from hypothesis import strategies as st

from mcpfleet.httplimits import BodyLimits, HttpLimits, uvicorn_options
from tests.conformance.harness import free_port
from tests.mcp_messages import initialize_request

# Small limits so the limit tests are quick: 64 KiB bodies, 1 s to send a body or headers.
TEST_LIMITS = HttpLimits(max_body_bytes=64 * 1024, body_timeout=1.0, header_timeout=1.0, max_json_depth=64)
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
TRACEBACK_MARKERS = (b"Traceback (most recent call last)", b'File "', b"Internal Server Error")


@dataclass
class ThreadServers:
    """ASGI apps served by uvicorn on one event loop in a background thread."""

    apps: list[tuple[Any, int, HttpLimits | None]] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _servers: list[uvicorn.Server] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def add(self, app: Any, limits: HttpLimits | None = HttpLimits()) -> str:
        """Queue an app (started in order by `start`); returns its base URL."""
        port = free_port()
        self.apps.append((app, port, limits))
        return f"http://127.0.0.1:{port}"

    def start(self, timeout: float = 60.0) -> None:
        ready = threading.Event()

        async def main() -> None:
            tasks = []
            for app, port, limits in self.apps:
                extra: dict[str, Any] = uvicorn_options(limits) if limits is not None else {}
                served = BodyLimits(app, limits) if limits is not None else app
                config = uvicorn.Config(
                    served, host="127.0.0.1", port=port, log_level="error", lifespan="on", **extra
                )
                server = uvicorn.Server(config)
                self._servers.append(server)
                task = asyncio.create_task(server.serve())
                tasks.append(task)
                while not server.started:
                    if task.done():
                        raise RuntimeError(f"server on port {port} did not start: {task.exception()!r}")
                    await asyncio.sleep(0.02)
            ready.set()
            await asyncio.gather(*tasks, return_exceptions=True)  # each ends once told to exit

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # reported to the test thread
                self._error = exc
                ready.set()

        self._thread = threading.Thread(target=run, name="hostile-servers", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or self._error is not None:
            raise RuntimeError(f"servers did not start: {self._error!r}")

    def stop(self) -> None:
        for server in reversed(self._servers):
            server.should_exit = True
            server.force_exit = True
        if self._thread is not None:
            self._thread.join(20)


@contextlib.contextmanager
def running(start: Callable[[], tuple[ThreadServers, str]]) -> Iterator[str]:
    """Servers from `start()` for the duration of the block; yields the base URL it returned."""
    servers, base = start()
    try:
        yield base
    finally:
        servers.stop()


def stall(port: int, count: int, budget: float) -> tuple[int, float]:
    """Open `count` connections that never finish a request (half send nothing, half stop inside
    the headers); return how many the server closed within `budget` seconds, and the time taken."""
    sockets: list[socket.socket] = []
    try:
        for i in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            sockets.append(s)
        t0 = time.monotonic()
        closed = 0
        for s in sockets:
            s.settimeout(max(0.1, budget - (time.monotonic() - t0)))
            try:
                while s.recv(4096):
                    pass
                closed += 1
            except TimeoutError:
                pass
        return closed, time.monotonic() - t0
    finally:
        for s in sockets:
            s.close()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    def messages(self) -> list[Any]:
        """The JSON-RPC messages of a JSON or SSE answer."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            out = []
            for line in self.body.splitlines():
                if line.startswith(b"data:"):
                    with contextlib.suppress(orjson.JSONDecodeError):
                        out.append(orjson.loads(line[5:]))
            return out
        return [self.json()] if self.body else []


def post(
    base: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float = 30.0,
    read_for: float = 3.0,
    until: bytes | None = None,
) -> Reply:
    """One raw POST /mcp on a fresh connection. A body still streaming after `read_for` seconds
    (an open notification stream) is cut there: its status and first bytes are what is judged.
    With `until`, reading also stops once those bytes arrived (waiting up to `timeout`)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", "/mcp", body=body, headers=headers)
        resp = conn.getresponse()
        if conn.sock is not None:  # None once the answer said `connection: close`
            conn.sock.settimeout(timeout if until else read_for)
        chunks = []
        try:
            while chunk := resp.read1(65536):
                chunks.append(chunk)
                if until is not None:
                    buf = b"".join(chunks)
                    tail = buf[buf.find(until) :] if until in buf else b""
                    if b"\n\n" in tail or b"\r\n\r\n" in tail:  # the SSE event carrying it is complete
                        break
        except (TimeoutError, http.client.IncompleteRead):
            pass
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, b"".join(chunks))
    finally:
        conn.close()


BASE_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def modern_headers(message: Any) -> dict[str, str]:
    """2026-07-28 headers that agree with the body (method / name mirrored) when they can."""
    h = {**BASE_HEADERS, "mcp-protocol-version": MODERN}
    if isinstance(message, dict):
        method = message.get("method")
        if isinstance(method, str) and method.isascii() and method.isprintable():
            h["mcp-method"] = method
        params = message.get("params")
        if isinstance(params, dict):
            name = params.get("name", params.get("uri"))
            if isinstance(name, str) and name.isascii() and name.isprintable():
                h["mcp-name"] = name
    return h


def open_session(base: str) -> str:
    reply = post(base, orjson.dumps(initialize_request(LEGACY)), BASE_HEADERS)
    assert reply.status == 200, reply
    sid = reply.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(base, orjson.dumps(note), {**BASE_HEADERS, "mcp-session-id": sid}).status == 202
    return sid


def legacy_headers(sid: str) -> dict[str, str]:
    return {**BASE_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": LEGACY}


def good_tools_list(base: str, era: str, sid: str | None) -> list[dict[str, Any]]:
    """A well-formed tools/list in `era`; asserts it is answered and returns the tools."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": "good", "method": "tools/list"}
    if era == MODERN:
        msg["params"] = {"_meta": META}
        headers = modern_headers(msg)
    else:
        assert sid is not None
        headers = legacy_headers(sid)
    reply = post(base, orjson.dumps(msg), headers, until=b'"id":"good"')
    assert reply.status == 200, (reply.status, reply.body[:300])
    answers = [m for m in reply.messages() if isinstance(m, dict) and m.get("id") == "good"]
    assert answers and "result" in answers[0], reply.body[:300]
    return list(answers[0]["result"]["tools"])


def assert_sane(reply: Reply, what: Any) -> None:
    """The invariant of every hostile answer: no 5xx and nothing that looks like a traceback."""
    assert reply.status < 500, f"{reply.status} for {what!r}: {reply.body[:300]!r}"
    for marker in TRACEBACK_MARKERS:
        assert marker not in reply.body, f"traceback-like body for {what!r}: {reply.body[:300]!r}"


class ErrorLog(logging.Handler):
    """Collects ERROR records (and anything logged with a traceback) while installed."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def tracebacks(self) -> list[str]:
        return [f"{r.name}: {r.getMessage()}" for r in self.records if r.exc_info]


@contextlib.contextmanager
def error_log() -> Iterator[ErrorLog]:
    handler = ErrorLog()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def nested(depth: int, leaf: Any = 1) -> Any:
    """`depth` levels of alternating objects and arrays around `leaf` (the outermost an object)."""
    value = leaf
    for i in range(depth):
        value = {"k": value} if (depth - 1 - i) % 2 == 0 else [value]
    return value


# Invalid JSON-RPC envelopes (defect 13) and a word their error message must contain.
ENVELOPES: list[tuple[Any, str]] = [
    ({"jsonrpc": "2.0", "id": 5}, '"method"'),
    ({"jsonrpc": "2.0", "id": 5, "method": 123}, '"method"'),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, '"id"'),
    ({"jsonrpc": "2.0", "id": [1], "method": "tools/list"}, '"id"'),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, '"id"'),
    ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, '"id"'),
    ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, '"jsonrpc"'),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"}, '"params"'),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "result": {}}, '"result"'),
    (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"progressToken": {}}}},
        "progressToken",
    ),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}, "requestId"),
    ([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], "batch"),
    # pydantic-core (the SDK transports' parser) keeps these as integers nothing can re-encode.
    (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "x", "arguments": {"n": 2**70}},
        },
        "64-bit",
    ),
]


def check_content_type(base: str, era: str, sid: str, ctype: str) -> None:
    """A POST with a wrong Content-Type is 415 in both eras; a right one in any spelling is served."""
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    headers = legacy_headers(sid) if era == LEGACY else modern_headers(msg)
    headers["content-type"] = ctype
    reply = post(base, orjson.dumps(msg), headers)
    assert reply.status == 415, reply
    headers["content-type"] = "Application/JSON; charset=utf-8"
    reply = post(base, orjson.dumps(msg), headers, until=b'"id":1')
    assert reply.status == 200, (reply.status, reply.body[:200])


def check_envelope_refused(reply: Reply, field: str) -> None:
    assert reply.status == 400, reply
    err = reply.json()
    assert err["error"]["code"] in (-32600, -32602) and field in err["error"]["message"], err
    assert err["id"] in (None, 1, 5)  # object / array / float ids are never echoed back


# ---- hypothesis strategies ----------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "notifications/cancelled",
    "notifications/initialized",
    "notifications/progress",
    "notifications/roots/list_changed",
    "tasks/get",
]
# Field names the services and the SDK types read, so generated params hit real code paths.
PARAM_FIELDS = [
    "name",
    "arguments",
    "uri",
    "cursor",
    "ref",
    "argument",
    "context",
    "level",
    "requestId",
    "reason",
    "notifications",
    "protocolVersion",
    "capabilities",
    "clientInfo",
    "progressToken",
    "progress",
    "_meta",
]
_field_values = st.one_of(
    json_values,
    st.just(META),
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["ref/prompt", "ref/resource", 3]),
            "name": json_values,
            "uri": json_values,
        },
    ),
    st.fixed_dictionaries(
        {}, optional={"toolsListChanged": json_values, "resourceSubscriptions": json_values}
    ),
)
params_values = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(PARAM_FIELDS), _field_values, max_size=5),
    st.builds(
        lambda d: {**d, "_meta": META},
        st.dictionaries(st.sampled_from(PARAM_FIELDS), _field_values, max_size=4),
    ),
)
ids = st.one_of(
    st.integers(-5, 2**70),
    st.text(max_size=10),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0, None]),
        "id": ids,
        "method": st.one_of(st.sampled_from(METHODS), st.text(max_size=15), json_values),
        "params": params_values,
        "result": json_values,
        "error": st.one_of(json_values, st.fixed_dictionaries({"code": json_values, "message": json_values})),
    },
)


@st.composite
def hostile_bodies(draw: st.DrawFn) -> tuple[bytes, Any]:
    """A request body (bytes) and the message it encodes (None for raw garbage)."""
    kind = draw(st.sampled_from(["typed"] * 8 + ["envelope"] * 4 + ["batch", "deep", "garbage", "scalar"]))
    if kind == "garbage":
        return draw(st.binary(max_size=200)), None
    if kind == "scalar":
        value: Any = draw(json_values)
    elif kind == "batch":
        value = draw(st.lists(envelopes, max_size=3))
    elif kind == "deep":
        depth = draw(st.integers(min_value=1, max_value=600))
        value = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "x", "arguments": nested(depth)},
        }
    elif kind == "typed":
        # A well-formed envelope around generated params: reaches the per-method code paths.
        value = {"jsonrpc": "2.0", "method": draw(st.sampled_from(METHODS))}
        if draw(st.booleans()) or not value["method"].startswith("notifications/"):
            value["id"] = draw(st.one_of(st.integers(0, 10**6), st.text(max_size=6)))
        params = draw(params_values)
        if isinstance(params, dict) and draw(st.integers(0, 3)):
            params = {**params, "_meta": META}  # the 2026-07-28 envelope; legacy ignores it
        if params != {} or draw(st.booleans()):
            value["params"] = params
    else:
        value = draw(envelopes)
    return encode(value), value


def encode(value: Any) -> bytes:
    """JSON for any value, also those orjson does not write (nesting past 254, integers past 64 bits)."""
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return encode_deep(value)


def encode_deep(value: Any) -> bytes:
    parts: list[bytes] = []
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, bytes):
            parts.append(node)
        elif isinstance(node, dict):
            stack.append(b"}")
            for i, (k, v) in enumerate(reversed(list(node.items()))):
                if i:
                    stack.append(b",")
                stack.append(v)
                stack.append(json.dumps(k).encode() + b":")
            stack.append(b"{")
        elif isinstance(node, list):
            stack.append(b"]")
            for i, v in enumerate(reversed(node)):
                if i:
                    stack.append(b",")
                stack.append(v)
            stack.append(b"[")
        else:
            parts.append(json.dumps(node).encode())
    return b"".join(parts)


content_types = st.sampled_from(
    ["application/json"] * 6
    + ["application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", "", "application/jsonx"]
)


@dataclass
class Counter:
    cases: int = 0
    statuses: dict[int, int] = field(default_factory=dict)

    def record(self, status: int) -> None:
        self.cases += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1

    @property
    def server_errors(self) -> int:
        return sum(n for s, n in self.statuses.items() if s >= 500)


def fuzz_one(
    base: str, era: str, sid: str | None, body: bytes, value: Any, ctype: str, counter: Counter
) -> None:
    """Send one generated body in `era` and check the answer and that a good request still works."""
    headers = modern_headers(value) if era == MODERN else legacy_headers(sid or "")
    if ctype:
        headers["content-type"] = ctype
    else:
        headers.pop("content-type")
    reply = post(base, body, headers)
    counter.record(reply.status)
    assert_sane(reply, value if value is not None else body)


def run_fuzz(base: str, era: str, counter: Counter, examples: int) -> None:
    """`examples` generated bodies against `base` in `era`; a good tools/list after a quarter of
    them and at the end; no traceback logged meanwhile."""
    from hypothesis import HealthCheck, given, settings

    sid = open_session(base) if era == LEGACY else None
    good_tools_list(base, era, sid)  # the service (and a proxy's child of this era) is up

    @given(body=hostile_bodies(), ctype=content_types, check_after=st.integers(0, 3))
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(body: tuple[bytes, Any], ctype: str, check_after: int) -> None:
        fuzz_one(base, era, sid, body[0], body[1], ctype, counter)
        if check_after == 0:  # every case would double the run time
            good_tools_list(base, era, sid)

    with error_log() as log:
        run()
    assert not log.tracebacks(), log.tracebacks()[:5]
    assert good_tools_list(base, era, sid)


def report_counts(service: str, counters: dict[str, Counter], minimum: int) -> None:
    for era, counter in counters.items():
        print(f"{service} fuzz {era}: {counter.cases} cases, statuses {sorted(counter.statuses.items())}")
        assert counter.cases >= minimum, (era, counter.cases)
        assert counter.server_errors == 0
