"""The console's pages: FastAPI routes rendering Jinja2 templates (autoescaped), htmx for live parts.

One app per fleet (`create_app(state_dir)` for a local fleet, `create_app(KubeSource(...))` for a
namespace of a cluster: `source.FleetSource`); `security.Guard` wraps it (Host / Origin, CSRF,
bounds, Content-Security-Policy). Pages: the fleet (`/`, its table and events timeline polled by htmx
every `POLL_SECONDS`), an object (`/objects/{kind}/{name}`: status, events, live tools / prompts /
resources, logs, manifest), a gateway (`/gateways/{name}`: aggregated tools with their backend,
backends' health, the optimizer's find_tool box), try a tool (`/try`), the catalogue (`/catalogue`)
and the audit log (`/audit`, local files only).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from mcpfleet.api.kindnames import MCP_GROUP, MCP_REGISTRY, MCP_SERVER, VIRTUAL_MCP_SERVER, WORKLOAD_KINDS
from mcpfleet.catalogue.manifest import AddError
from mcpfleet.console import auditlog, cataloguepage, fleetview, live, schemaform, timeline
from mcpfleet.console.security import CSRF_FIELD, CsrfToken, Guard
from mcpfleet.console.source import FleetSource, LocalSource, SourceError

POLL_SECONDS = 2
NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
KINDS = set(WORKLOAD_KINDS)
MAX_BACKENDS_LISTED = 50
FIND_TOOL = "find_tool"
FIND_FIELD = "tool_description"
"""The optimizer's search tool and its query argument, as a gateway with the optimizer lists them."""


def templates() -> Environment:
    """Autoescaping on for every template (whatever its name): nothing a server says becomes markup."""
    env = Environment(
        loader=PackageLoader("mcpfleet.console", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["POLL_SECONDS"] = POLL_SECONDS
    # The templates name kinds through these, never as literals (the kinds' names live in `api`).
    env.globals["GATEWAY_KIND"] = VIRTUAL_MCP_SERVER
    env.globals["SERVER_KIND"] = MCP_SERVER
    return env


@dataclass
class Console:
    source: FleetSource
    csrf: CsrfToken
    env: Environment

    def page(self, template: str, request: Request, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(
            csrf_field=CSRF_FIELD,
            csrf_token=self.csrf.value,
            path=request.url.path,
            on_kubernetes=self.source.kubernetes,
            **values,
        )
        return HTMLResponse(html, status_code=status)

    def fragment(self, template: str, request: Request, status: int = 200, **values: Any) -> HTMLResponse:
        """An htmx answer (the fragment alone), or the fragment in a whole page for a plain form post."""
        if request.headers.get("hx-request") == "true":
            return self.page(template, request, status, **values)
        title = values.pop("title", "Result")
        return self.page("fragment_page.html", request, status, fragment=template, title=title, **values)

    async def target(self, kind: str, name: str) -> tuple[str, str] | PlainTextResponse:
        if kind not in KINDS - {MCP_REGISTRY}:
            return _bad("kind: expected MCPServer, MCPRemoteProxy or VirtualMCPServer")
        if (problem := _check_name(name)) is not None:
            return _bad(problem)
        obj = await self.source.find(kind, name)
        if obj is None:
            return _bad(f"{kind} {name!r} not found in this fleet", 404)
        url = str(obj.status.get("url") or "")
        if not url:
            return _bad(f"{kind} {name!r} is not running (no URL)", 409)
        return url, name

    async def tool_of(self, url: str, tool: str) -> live.Tool | str:
        lists = await live.read_lists(url)
        if lists.error:
            return lists.error
        for candidate in lists.tools:
            if candidate.name == tool:
                return candidate
        return f"tool: the server lists no tool named {tool[:200]!r}"


def _bad(message: str, status: int = 400) -> PlainTextResponse:
    return PlainTextResponse(message, status_code=status)


def _check_name(name: str) -> str | None:
    return (
        None if NAME.match(name) else "name: expected a Kubernetes object name (lower case, digits, '-', '.')"
    )


def create_app(
    fleet: Path | FleetSource, *, csrf: CsrfToken | None = None, extra_hosts: list[str] | None = None
) -> ASGIApp:
    """The console of a local fleet (its state folder) or of any `FleetSource`; `extra_hosts` are
    the Host names accepted besides loopback (a Service's name in a cluster)."""
    source = LocalSource(fleet) if isinstance(fleet, Path) else fleet
    console = Console(source=source, csrf=csrf or CsrfToken(), env=templates())
    app = FastAPI(title="mcpfleet console", docs_url=None, redoc_url=None, openapi_url=None)
    static = resources.files("mcpfleet.console") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    _error_handlers(app)
    _fleet_routes(app, console)
    _object_routes(app, console)
    _try_routes(app, console)
    _catalogue_routes(app, console)
    return Guard(app, console.csrf, extra_hosts)


def _error_handlers(app: FastAPI) -> None:
    """Refusals are short plain text naming the field (never FastAPI's JSON, never a traceback)."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> PlainTextResponse:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'request'}: {e.get('msg', 'invalid')}"
            for e in exc.errors()[:5]
        ]
        return _bad("; ".join(problems), 422)

    @app.exception_handler(SourceError)
    async def unreadable(_request: Request, exc: SourceError) -> PlainTextResponse:
        return _bad(str(exc), exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> PlainTextResponse:
        return _bad(str(exc.detail), exc.status_code)


def _fleet_routes(app: FastAPI, console: Console) -> None:
    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/", response_class=HTMLResponse)
    async def fleet(request: Request) -> HTMLResponse:
        view, events = await _fleet_and_events(console.source)
        return console.page(
            "fleet.html", request, fleet=view, events=events, title="Fleet", label=console.source.label
        )

    @app.get("/fleet/table", response_class=HTMLResponse)
    async def fleet_table(request: Request) -> HTMLResponse:
        view, events = await _fleet_and_events(console.source)
        return console.page("fleet_table.html", request, fleet=view, events=events)

    @app.get("/audit", response_class=HTMLResponse)
    async def audit(
        request: Request, who: str = Query(""), tool: str = Query(""), outcome: str = Query("")
    ) -> Response:
        if outcome and outcome not in auditlog.OUTCOMES:
            return _bad(f"outcome: expected one of {', '.join(auditlog.OUTCOMES)}")
        files = [] if console.source.kubernetes else auditlog.audit_files(await console.source.objects())
        events = await asyncio.to_thread(auditlog.read_events, files, who, tool, outcome)
        return console.page(
            "audit.html",
            request,
            title="Audit log",
            files=files,
            events=events,
            who=who,
            tool=tool,
            outcome=outcome,
            outcomes=auditlog.OUTCOMES,
        )


def _object_routes(app: FastAPI, console: Console) -> None:
    @app.get("/objects/{kind}/{name}", response_class=HTMLResponse)
    async def an_object(request: Request, kind: str, name: str) -> Response:
        if kind not in KINDS:
            return _bad(f"kind: expected one of {', '.join(sorted(KINDS))}", 404)
        if (problem := _check_name(name)) is not None:
            return _bad(problem)
        obj = await console.source.find(kind, name)
        if obj is None:
            return _bad(f"{kind} {name!r} not found in this fleet", 404)
        row = fleetview.row_of(obj)
        lists = await live.read_lists(row.url) if row.url and kind != MCP_REGISTRY else None
        logs = await console.source.logs(name)
        events, events_problem = await _events(console.source, kind, name)
        try:
            pods, pods_problem = await console.source.pods(kind, name), ""
        except SourceError as exc:
            pods, pods_problem = [], str(exc)
        return console.page(
            "object.html",
            request,
            title=f"{kind} {name}",
            row=row,
            lists=lists,
            logs=logs,
            events=events,
            events_problem=events_problem,
            pods=pods,
            pods_problem=pods_problem,
            manifest=fleetview.manifest_yaml(obj),
            conditions=[c for c in obj.status.get("conditions") or [] if isinstance(c, dict)],
        )

    @app.get("/gateways/{name}", response_class=HTMLResponse)
    async def gateway(request: Request, name: str) -> Response:
        if (problem := _check_name(name)) is not None:
            return _bad(problem)
        obj = await console.source.find(VIRTUAL_MCP_SERVER, name)
        if obj is None:
            return _bad(f"VirtualMCPServer {name!r} not found in this fleet", 404)
        row = fleetview.row_of(obj)
        backends = [b for b in obj.status.get("discoveredBackends") or [] if isinstance(b, dict)]
        health, tools = await asyncio.gather(_gateway_status(row.url), _gateway_tools(row.url, backends))
        aggregation = ((obj.manifest.get("spec") or {}).get("config") or {}).get("aggregation") or {}
        events, events_problem = await _events(console.source, VIRTUAL_MCP_SERVER, name)
        return console.page(
            "gateway.html",
            request,
            title=f"Gateway {name}",
            row=row,
            backends=backends,
            health=health,
            tools=tools,
            conflict=str(aggregation.get("conflictResolution") or "prefix"),
            kinds={o.name: o.kind for o in await console.source.objects() if o.kind in KINDS},
            finder=next((t.tool for t in tools[0] if t.tool.name == FIND_TOOL), None),
            find_field=schemaform.FIELD_PREFIX + FIND_FIELD,
            events=events,
            events_problem=events_problem,
        )


async def _gateway_status(url: str) -> dict[str, dict[str, Any]]:
    """Each backend's health and circuit state from the gateway's `/status` (empty when unreachable)."""
    if not url:
        return {}
    status_url = url.rsplit("/mcp", 1)[0] + "/status"
    try:
        async with httpx.AsyncClient(timeout=5.0) as client:
            answer = await client.get(status_url)
        document = answer.json() if answer.status_code == 200 and len(answer.content) < 4_000_000 else {}
    except (httpx.HTTPError, ValueError):
        return {}
    backends = document.get("backends") if isinstance(document, dict) else None
    return {str(b.get("name")): b for b in backends or [] if isinstance(b, dict)}


@dataclass(frozen=True)
class GatewayTool:
    tool: live.Tool
    origin: str


async def _gateway_tools(url: str, backends: list[dict[str, Any]]) -> tuple[list[GatewayTool], str]:
    """The gateway's tools, each with the backend it comes from: the backend offering a tool of the
    same description whose name ends the gateway's (prefixes and renames keep the end)."""
    if not url:
        return [], "the gateway has no URL yet"
    shown = backends[:MAX_BACKENDS_LISTED]
    answers = await asyncio.gather(
        live.read_lists(url), *(live.read_lists(str(b.get("url") or "")) for b in shown if b.get("url"))
    )
    gateway, per_backend = answers[0], answers[1:]
    names = [str(b.get("name")) for b in shown if b.get("url")]
    out: list[GatewayTool] = []
    for tool in gateway.tools:
        origin = ""
        for backend, lists in zip(names, per_backend, strict=True):
            if any(tool.name.endswith(t.name) and t.description == tool.description for t in lists.tools):
                if not origin or len(backend) > len(origin):
                    origin = backend
        out.append(GatewayTool(tool, origin or "?"))
    return out, gateway.error


def _try_routes(app: FastAPI, console: Console) -> None:
    @app.get("/try", response_class=HTMLResponse)
    async def try_form(
        request: Request, kind: str = Query(...), name: str = Query(...), tool: str = Query(...)
    ) -> Response:
        found = await console.target(kind, name)
        if isinstance(found, PlainTextResponse):
            return found
        chosen = await console.tool_of(found[0], tool)
        if isinstance(chosen, str):
            return _bad(chosen, 404)
        return console.page(
            "try.html",
            request,
            title=f"Try {chosen.name}",
            kind=kind,
            name=name,
            tool=chosen,
            fields=schemaform.fields(chosen.schema),
            schema_text=live.cut(json.dumps(chosen.schema, indent=2, ensure_ascii=False, default=str)),
            whole=schemaform.WHOLE,
            no_input=schemaform.takes_no_input(chosen.schema),
        )

    @app.post("/try", response_class=HTMLResponse)
    async def try_call(request: Request) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        found = await console.target(form.get("kind", ""), form.get("name", ""))
        if isinstance(found, PlainTextResponse):
            return found
        chosen = await console.tool_of(found[0], form.get("tool", ""))
        if isinstance(chosen, str):
            return _bad(chosen, 404)
        try:
            arguments = schemaform.arguments(chosen.schema, form)
        except schemaform.ArgumentError as exc:
            return console.fragment("result.html", request, status=422, result=None, problem=str(exc))
        result = await live.call_tool(found[0], chosen.name, arguments)
        if form.get("view") == "found" and chosen.name == FIND_TOOL:
            # The find box: the tools found as a table (and the answer itself, as text, below it).
            tools = live.found_tools(result.data) if not (result.error or result.is_error) else []
            return console.fragment("found.html", request, result=result, found=tools, problem="")
        return console.fragment("result.html", request, result=result, problem="")


def _catalogue_routes(app: FastAPI, console: Console) -> None:
    source = console.source

    @app.get("/catalogue", response_class=HTMLResponse)
    async def catalogue(request: Request, q: str = Query("")) -> HTMLResponse:
        entries, problems = await cataloguepage.search(q, source.state_dir, await source.registry_urls())
        return console.page(
            "catalogue.html", request, title="Catalogue", q=q, entries=entries, problems=problems
        )

    @app.get("/catalogue/entry", response_class=HTMLResponse)
    async def entry(request: Request, name: str = Query(...)) -> Response:
        found = await cataloguepage.lookup(name, source.state_dir, await source.registry_urls())
        if found is None:
            return _bad(f"name: no catalogue entry named {name[:200]!r}", 404)
        return console.page(
            "entry.html",
            request,
            title=found.name,
            entry=found,
            inputs=cataloguepage.inputs(found),
            server_text=json.dumps(found.server, indent=2, ensure_ascii=False),
            groups=[o.name for o in await source.objects(MCP_GROUP)],
            folder=await _manifests_folder(source),
            namespace=source.namespace,
        )

    @app.post("/catalogue/add", response_class=HTMLResponse)
    async def add(request: Request) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        found = await cataloguepage.lookup(
            form.get("entry", ""), source.state_dir, await source.registry_urls()
        )
        if found is None:
            return _bad("entry: no such catalogue entry", 404)
        folder = await _manifests_folder(source)
        if folder is None and not source.kubernetes:
            return console.fragment(
                "added.html", request, status=409, written="", problem="no running fleet to add to"
            )
        groups = {o.name for o in await source.objects(MCP_GROUP)}
        group = form.get("group") or None
        if group is not None and group not in groups:
            return console.fragment(
                "added.html", request, status=422, written="", problem="group: not a group of this fleet"
            )
        fields = {k: v for k, v in form.items() if k.startswith(("env.", "arg."))}
        name = form.get("object_name") or found.short_name
        state_dir = source.state_dir
        try:
            if folder is None or state_dir is None:
                plan = cataloguepage.plan_for(found, name, fields, group)
                shown = cataloguepage.for_cluster(plan, source.namespace)
                return console.fragment("apply.html", request, manifest=shown)
            written = await asyncio.to_thread(
                cataloguepage.add, found, name, fields, folder, state_dir, group
            )
        except AddError as exc:
            return console.fragment("added.html", request, status=422, written="", problem=str(exc))
        return console.fragment("added.html", request, written=str(written.name), problem="")


async def _manifests_folder(source: FleetSource) -> Path | None:
    state_dir = source.state_dir
    return None if state_dir is None else await asyncio.to_thread(fleetview.manifests_folder, state_dir)


async def _fleet_and_events(source: FleetSource) -> tuple[fleetview.Fleet, tuple[list[timeline.Event], str]]:
    view, events = await asyncio.gather(source.fleet(), _events(source, None, None))
    return view, events


async def _events(
    source: FleetSource, kind: str | None, name: str | None
) -> tuple[list[timeline.Event], str]:
    """The timeline, or why it could not be read (the page still shows everything else)."""
    try:
        return await source.events(kind, name), ""
    except SourceError as exc:
        return [], str(exc)
