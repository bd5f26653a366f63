"""mcpfleet's MCP conformance fixture server.

Implements the tools, resources, prompts and handlers that the server scenarios of
`@modelcontextprotocol/conformance` look for (names such as `test_simple_text`, URIs such as
`test://static-text`), on the mcp SDK v2 `MCPServer` API. It runs over stdio (behind
`mcpfleet proxy`, the vMCP gateway, or anything else that spawns it) or over streamable HTTP
(to measure the suite directly):

    python fixture_server.py --transport stdio
    python fixture_server.py --transport http --host 127.0.0.1 --port 8123

`build_server()` returns a fresh server each call; all mutable state lives in a `FixtureState`
object built alongside it, so tests can run several servers in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    JSONRPCMessage,
    ListRootsRequest,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

log = logging.getLogger("mcpfleet.conformance.fixture")

# A 1x1 PNG and a tiny WAV: the scenarios only check the content type and that data is base64.
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_TINY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# requestState is sealed by the SDK with this key; it must be stable across processes (the proxy
# may restart the child between two rounds of a multi-round-trip call). Test-only material.
REQUEST_STATE_KEY = b"mcpfleet-conformance-fixture-request-state-key-000"


@dataclass
class FixtureState:
    """Per-server mutable state (subscriptions, log level)."""

    subscriptions: set[str] = field(default_factory=set)
    log_level: str = "info"


class MemoryEventStore(EventStore):
    """Keeps every SSE event in memory so a client can resume with Last-Event-ID (HTTP mode only)."""

    def __init__(self) -> None:
        self._events: list[tuple[str, int, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        seq = len(self._events) + 1
        self._events.append((stream_id, seq, message))
        return str(seq)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        try:
            after = int(last_event_id)
        except ValueError:
            return None
        if not 0 < after <= len(self._events):
            return None
        stream_id = self._events[after - 1][0]
        for sid, seq, message in self._events[after:]:
            if sid == stream_id and message is not None:
                await send_callback(EventMessage(message, str(seq)))
        return stream_id


class AskName(BaseModel):
    response: str = Field(description="User's response")


class ProfileWithDefaults(BaseModel):
    """SEP-1034: one default per primitive type."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


class EnumVariants(BaseModel):
    """SEP-1330: the five enum shapes an elicitation schema may use."""

    untitledSingle: str = Field(
        description="Simple enum without titles",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    titledSingle: str = Field(
        description="Enum with titled options (oneOf)",
        json_schema_extra={
            "oneOf": [
                {"const": "low", "title": "Low Priority"},
                {"const": "medium", "title": "Medium Priority"},
                {"const": "high", "title": "High Priority"},
            ]
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}},
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "feature", "title": "New Feature"},
                    {"const": "bug", "title": "Bug Fix"},
                    {"const": "docs", "title": "Documentation"},
                ]
            }
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    )


SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _form(message: str, properties: dict[str, Any], required: list[str]) -> ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": required}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _ask_name(message: str = "What is your name?") -> ElicitRequest:
    return _form(message, {"name": {"type": "string"}}, ["name"])


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    return CreateMessageRequest(
        params=CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=text))],
            max_tokens=max_tokens,
        )
    )


def _elicited(answer: object, key: str) -> Any:
    if isinstance(answer, ElicitResult) and answer.content:
        return answer.content.get(key)
    return None


def _register_content_tools(server: MCPServer) -> None:
    @server.tool()
    def test_simple_text() -> str:
        """Returns one text block."""
        return "This is a simple text response for testing."

    @server.tool()
    def test_image_content() -> list[ImageContent]:
        """Returns one PNG image block."""
        return [ImageContent(type="image", data=PNG_1PX, mime_type="image/png")]

    @server.tool()
    def test_audio_content() -> list[AudioContent]:
        """Returns one WAV audio block."""
        return [AudioContent(type="audio", data=WAV_TINY, mime_type="audio/wav")]

    @server.tool()
    def test_embedded_resource() -> list[EmbeddedResource]:
        """Returns one embedded text resource."""
        contents = TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return [EmbeddedResource(type="resource", resource=contents)]

    @server.tool()
    def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
        """Returns text, image and embedded resource blocks together."""
        contents = TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test": "data", "value": 123}',
        )
        return [
            TextContent(type="text", text="Multiple content types test:"),
            ImageContent(type="image", data=PNG_1PX, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=contents),
        ]

    @server.tool()
    def test_error_handling() -> str:
        """Always fails, so the result carries isError=true."""
        raise RuntimeError("This tool intentionally returns an error for testing")

    @server.tool(name="json_schema_2020_12_tool")
    def json_schema_2020_12_tool() -> str:
        """Advertises an inputSchema using JSON Schema 2020-12 keywords."""
        return "json_schema_2020_12_tool"

    # The decorator derives the schema from the signature; this tool's point is a hand-written one.
    server._tool_manager._tools["json_schema_2020_12_tool"].parameters = SCHEMA_2020_12

    @server.tool()
    def test_x_mcp_header(
        region: Annotated[
            str,
            Field(
                description="Mirrored into the Mcp-Param-Region header",
                json_schema_extra={"x-mcp-header": "Region"},
            ),
        ] = "<none>",
    ) -> str:
        """Has an x-mcp-header parameter (SEP-2243 Mcp-Param-* header validation)."""
        return f"region={region}"


def _register_notifying_tools(server: MCPServer) -> None:
    @server.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Emits three log notifications while it runs."""
        for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.log("info", text)
            await asyncio.sleep(0.05)
        return "Tool with logging executed successfully"

    @server.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Emits progress 0, 50, 100 of 100 and returns the progress token it saw."""
        for step in (0, 50, 100):
            await ctx.report_progress(progress=step, total=100, message=f"Completed step {step} of 100")
            await asyncio.sleep(0.05)
        meta = ctx.request_context.meta if ctx.request_context else None
        return str(meta.get("progress_token") if meta else 0)

    @server.tool()
    async def test_reconnection(ctx: Context) -> str:
        """Closes its SSE stream mid-call so the client must resume (SEP-1699)."""
        await ctx.log("info", "Before disconnect")
        await ctx.close_sse_stream()
        await asyncio.sleep(0.2)
        await ctx.log("info", "After reconnect")
        return "Reconnection test completed"

    def dynamic() -> str:
        """Registered and removed again by the list-change triggers."""
        return "dynamic"

    @server.tool()
    async def test_trigger_tool_change(ctx: Context) -> str:
        """Changes the tool list and announces it."""
        server.add_tool(dynamic, name="test_dynamic_tool")
        server.remove_tool("test_dynamic_tool")
        await ctx.notify_tools_changed()
        return "tool list changed"

    @server.tool()
    async def test_trigger_prompt_change(ctx: Context) -> str:
        """Changes the prompt list and announces it."""
        server.add_prompt(Prompt.from_function(dynamic, name="test_dynamic_prompt", description="dynamic"))
        server.remove_prompt("test_dynamic_prompt")
        await ctx.notify_prompts_changed()
        return "prompt list changed"


def _register_client_request_tools(server: MCPServer) -> None:
    """Tools that call back into the client (2025-11-25 era: sampling and elicitation requests)."""

    @server.tool()
    async def test_sampling(prompt: str, ctx: Context) -> str:
        """Asks the client's LLM to answer `prompt`."""
        try:
            result = await ctx.session.create_message(
                messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
                max_tokens=100,
                # Without it the request would go to the standalone GET stream, which may not be open.
                related_request_id=ctx.request_id,
            )
        except Exception as exc:
            return f"Sampling not supported or error: {exc}"
        text = result.content.text if result.content.type == "text" else "No response"
        return f"LLM response: {text}"

    async def elicit(ctx: Context, message: str, schema: type[BaseModel], prefix: str) -> str:
        try:
            result = await ctx.elicit(message=message, schema=schema)
        except Exception as exc:
            return f"Elicitation not supported or error: {exc}"
        content = result.data.model_dump_json() if result.action == "accept" else "{}"
        return f"{prefix}: action={result.action}, content={content}"

    @server.tool()
    async def test_elicitation(message: str, ctx: Context) -> str:
        """Asks the user for a free-text response."""
        return await elicit(ctx, message, AskName, "User response")

    @server.tool()
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Elicits a form whose fields all carry defaults."""
        return await elicit(ctx, "Please provide user information", ProfileWithDefaults, "Elicitation result")

    @server.tool()
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Elicits a form using every enum schema variant."""
        return await elicit(
            ctx,
            "Please select values using different enum schema types",
            EnumVariants,
            "Elicitation completed",
        )

    @server.tool()
    async def test_missing_capability(ctx: Context) -> str:
        """Fails with MISSING_REQUIRED_CLIENT_CAPABILITY unless the client declared sampling."""
        caps = ctx.session.client_capabilities
        if caps is None or caps.sampling is None:
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool requires the client 'sampling' capability",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        return "Client declared sampling capability; proceeding."


def _register_input_required_tools(server: MCPServer) -> None:
    """2026-07-28 era: multi-round-trip requests answered with InputRequiredResult (SEP-2322)."""

    @server.tool()
    async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
        """One elicitation round."""
        responses = ctx.input_responses or {}
        if "user_name" in responses:
            return f"Hello, {_elicited(responses['user_name'], 'name') or '?'}!"
        return InputRequiredResult(input_requests={"user_name": _ask_name()})

    @server.tool()
    async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
        """One sampling round."""
        responses = ctx.input_responses or {}
        answer = responses.get("capital_question")
        if answer is not None:
            text = (
                answer.content.text
                if isinstance(answer, CreateMessageResult) and answer.content.type == "text"
                else "?"
            )
            return f"Model said: {text}"
        return InputRequiredResult(
            input_requests={"capital_question": _sample("What is the capital of France?", 100)}
        )

    @server.tool()
    async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
        """One roots/list round."""
        responses = ctx.input_responses or {}
        answer = responses.get("client_roots")
        if answer is not None:
            count = len(answer.roots) if isinstance(answer, ListRootsResult) else 0
            return f"Client exposed {count} root(s)."
        return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})


CONFIRM_PROPS = {"ok": {"type": "boolean"}}


def _register_input_required_state_tools(server: MCPServer) -> None:
    """2026-07-28 era: InputRequiredResult tools that carry requestState across rounds (SEP-2322)."""

    @server.tool()
    async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
        """Round-trips an opaque requestState."""
        if "confirm" in (ctx.input_responses or {}) and ctx.request_state == "request-state-nonce":
            return "state-ok: confirmation received"
        return InputRequiredResult(
            input_requests={"confirm": _form("Please confirm", CONFIRM_PROPS, ["ok"])},
            request_state="request-state-nonce",
        )

    @server.tool()
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
        """Asks for elicitation, sampling and roots in one round."""
        if {"user_name", "greeting", "client_roots"} <= (ctx.input_responses or {}).keys():
            return "All inputs received."
        return InputRequiredResult(
            input_requests={
                "user_name": _ask_name(),
                "greeting": _sample("Generate a greeting", 50),
                "client_roots": ListRootsRequest(),
            },
            request_state="multiple-inputs",
        )

    @server.tool()
    async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
        """Three rounds; requestState carries what was learnt so far."""
        state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
        responses = ctx.input_responses or {}
        restart = InputRequiredResult(
            input_requests={"step1": _ask_name("Step 1: What is your name?")},
            request_state=json.dumps({"round": 1}),
        )
        if state.get("round") == 1 and "step1" in responses:
            return InputRequiredResult(
                input_requests={
                    "step2": _form(
                        "Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"]
                    )
                },
                request_state=json.dumps({"round": 2, "name": _elicited(responses["step1"], "name")}),
            )
        if state.get("round") == 2 and "step2" in responses:
            return f"{state.get('name')} likes {_elicited(responses['step2'], 'color')}."
        return restart

    @server.tool()
    async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
        """The SDK's sealed requestState rejects a tampered echo before this runs."""
        if ctx.request_state is None:
            return InputRequiredResult(
                input_requests={"confirm": _form("Please confirm", CONFIRM_PROPS, ["ok"])},
                request_state="round-1",
            )
        return f"state-ok: {ctx.request_state}"


def _register_input_required_capability_tool(server: MCPServer) -> None:
    """2026-07-28 era: an InputRequiredResult that asks only for what the client supports."""

    @server.tool()
    async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
        """Only asks for what the client declared it supports."""
        caps = ctx.client_capabilities
        wanted: dict[str, InputRequest] = {}
        if caps is None or caps.sampling is not None:
            wanted["sample"] = _sample("Say hello", 50)
        if caps is None or caps.elicitation is not None:
            wanted["ask"] = _ask_name()
        return InputRequiredResult(input_requests=wanted, request_state="capability-gated")


def _register_resources(server: MCPServer, state: FixtureState) -> None:
    @server.resource("test://static-text")
    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    @server.resource("test://static-binary")
    def static_binary() -> bytes:
        """A static binary resource (a PNG)."""
        return base64.b64decode(PNG_1PX)

    @server.resource("test://template/{id}/data")
    def templated(id: str) -> str:
        """A templated resource echoing its parameter."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource")
    def watched() -> str:
        """A resource clients may subscribe to."""
        return "Watched resource content"

    async def subscribe(ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
        state.subscriptions.add(str(params.uri))
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams) -> EmptyResult:
        state.subscriptions.discard(str(params.uri))
        return EmptyResult()

    # MCPServer has no public hook for these three handlers yet; the low-level server does.
    server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    server._lowlevel_server.add_request_handler(
        "resources/unsubscribe", UnsubscribeRequestParams, unsubscribe
    )


def _register_prompts(server: MCPServer) -> None:
    @server.prompt()
    def test_simple_prompt() -> list[UserMessage]:
        """A prompt without arguments."""
        return [
            UserMessage(
                role="user", content=TextContent(type="text", text="This is a simple prompt for testing.")
            )
        ]

    @server.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        """A prompt with two required arguments."""
        text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
        return [UserMessage(role="user", content=TextContent(type="text", text=text))]

    @server.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
        """A prompt embedding the resource named by its argument."""
        contents = TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(role="user", content=EmbeddedResource(type="resource", resource=contents)),
            UserMessage(
                role="user",
                content=TextContent(type="text", text="Please process the embedded resource above."),
            ),
        ]

    @server.prompt()
    def test_prompt_with_image() -> list[UserMessage]:
        """A prompt with an image."""
        return [
            UserMessage(role="user", content=ImageContent(type="image", data=PNG_1PX, mime_type="image/png")),
            UserMessage(
                role="user", content=TextContent(type="text", text="Please analyze the image above.")
            ),
        ]

    @server.prompt()
    async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
        """A prompt that first asks the client for context (SEP-2322 on a non-tool request)."""
        responses = ctx.input_responses or {}
        if "user_context" in responses:
            text = _elicited(responses["user_context"], "context") or "?"
            return [
                UserMessage(
                    role="user", content=TextContent(type="text", text=f"Use the following context: {text}")
                )
            ]
        ask = _form("What context should the prompt use?", {"context": {"type": "string"}}, ["context"])
        return InputRequiredResult(input_requests={"user_context": ask})


def build_server() -> MCPServer:
    """A fresh fixture server with its own state."""
    state = FixtureState()
    server = MCPServer(
        name="mcpfleet-conformance-fixture",
        version="0.1.0",
        request_state_security=RequestStateSecurity(keys=[REQUEST_STATE_KEY]),
    )
    _register_content_tools(server)
    _register_notifying_tools(server)
    _register_client_request_tools(server)
    _register_input_required_tools(server)
    _register_input_required_state_tools(server)
    _register_input_required_capability_tool(server)
    _register_resources(server, state)
    _register_prompts(server)

    async def set_level(ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> EmptyResult:
        state.log_level = params.level
        return EmptyResult()

    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        # The scenario checks the shape; offer the values that start with what was typed.
        options = ["alpha", "beta", "gamma"]
        values = [v for v in options if v.startswith(argument.value or "")]
        return Completion(values=values, total=len(values), has_more=False)

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--port", type=int, default=0, help="HTTP port (0 = let the OS pick; printed on stderr)"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    # Logs go to stderr: stdout is the protocol channel in stdio mode.
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
        return
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        asyncio.run(_serve_http(server, args.host, args.port))
    else:
        uvloop.run(_serve_http(server, args.host, args.port))


async def _serve_http(server: MCPServer, host: str, port: int) -> None:
    import socket

    import uvicorn

    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=100, host=host)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    print(
        f"fixture listening on http://{host}:{sock.getsockname()[1]}/mcp",
        file=__import__("sys").stderr,
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    main()
