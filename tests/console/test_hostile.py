"""The console's hostile suite: a corpus of hostile requests and hypothesis properties.

What comes from servers (tool names, titles, descriptions, schemas, results) never becomes markup:
rendered with any text, a page has exactly the tags it has with plain text. What comes from the
person's browser (query values, forms, Host, Origin, the CSRF token) is refused with a 4xx naming
the problem, never a 5xx or a traceback; a cross-site POST never reaches a route.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from mcpfleet.console import live, schemaform
from mcpfleet.console.app import create_app, templates
from mcpfleet.console.security import MAX_BODY_BYTES, MAX_QUERY_BYTES, CsrfToken
from tests.console.conftest import BASE, TOKEN, failed, manifest, running, write_state
from tests.hostile import TRACEBACK_MARKERS, nested

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
ORIGIN = {"Origin": BASE}
FORM = {"Content-Type": "application/x-www-form-urlencoded", **ORIGIN}
hostile_text = st.one_of(
    st.text(min_size=1, max_size=200),
    st.sampled_from(
        [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            '"><svg onload=alert(1)>',
            "</textarea><script>x</script>",
            "{{ 7*7 }}{% raw %}",
            "javascript:alert(1)",
            "\u202e\u0000\x1b[31m",
            "&lt;b&gt;",
        ]
    ),
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    state_dir = tmp_path_factory.mktemp("console") / "state"
    folder = state_dir.parent / "fleet"
    folder.mkdir()
    asyncio.run(
        write_state(
            state_dir,
            [
                (
                    manifest("MCPServer", "idle", {"image": "uvx://x", "transport": "stdio"}),
                    failed("<b>x</b>"),
                ),
                (
                    manifest("MCPServer", "down", {"image": "uvx://x", "transport": "stdio"}),
                    running("http://127.0.0.1:9/mcp"),
                ),
                (manifest("MCPGroup", "team", {}), {"phase": "Ready"}),
            ],
            meta={"manifests": str(folder)},
        )
    )
    with TestClient(
        create_app(state_dir, csrf=CsrfToken(TOKEN)), base_url=BASE, raise_server_exceptions=False
    ) as test_client:
        yield test_client


def assert_sane(status: int, body: bytes, what: Any) -> None:
    assert status < 500, f"{what}: {status} {body[:300]!r}"
    for marker in TRACEBACK_MARKERS:
        assert marker not in body, f"{what}: traceback in the answer {body[:300]!r}"


# -- corpus ---------------------------------------------------------------------------------

CORPUS_GET = [
    ("/catalogue?q=" + "a" * 600, 400),
    ("/audit?who=" + "x" * (MAX_QUERY_BYTES + 10), 414),
    ("/audit?outcome=%3Cscript%3E", 400),
    ("/objects/Secret/idle", 404),
    ("/objects/MCPServer/..%2F..%2Fetc%2Fpasswd", 404),
    ("/objects/MCPServer/UPPER", 400),
    ("/objects/MCPServer/a%00b", 400),
    ("/objects/MCPServer/" + "a" * 300, 400),
    ("/objects/MCPServer/nope", 404),
    ("/gateways/nope", 404),
    ("/try?kind=MCPServer&name=idle", 422),
    ("/try?kind=MCPRegistry&name=idle&tool=x", 400),
    ("/try?kind=MCPServer&name=idle&tool=x", 409),
    ("/try?kind=MCPServer&name=down&tool=%3Cscript%3E", 404),
    ("/catalogue/entry?name=%3Cimg%20src%3Dx%3E", 404),
    ("/static/../state/state.db", 404),
    ("/static/%2e%2e/app.py", 404),
    ("/fleet/table?" + "&".join(f"k{i}=v" for i in range(1000)), 414),
]


@pytest.mark.parametrize(("path", "status"), CORPUS_GET)
def test_hostile_get_corpus(client: TestClient, path: str, status: int) -> None:
    answer = client.get(path)
    assert_sane(answer.status_code, answer.content, path)
    assert answer.status_code == status, (path, answer.text[:300])
    if answer.headers["content-type"].startswith("text/html"):
        assert "<script>" not in answer.text and "<img src=x>" not in answer.text
    else:  # a refusal echoing a value is plain text, and the browser is told not to sniff it
        assert answer.headers["content-type"].startswith("text/plain")
        assert answer.headers["x-content-type-options"] == "nosniff"


def _try(**fields: str) -> dict[str, str]:
    return {"csrf_token": TOKEN, "kind": "MCPServer", "name": "down", "tool": "t", **fields}


CORPUS_POST: list[tuple[str, bytes | dict[str, str], dict[str, str], int]] = [
    ("/try", b"a=" + b"x" * (MAX_BODY_BYTES + 1), FORM, 413),
    ("/try", b"csrf_token=" + TOKEN.encode() + b"&kind=\xff\xfe", FORM, 400),
    ("/try", _try(), {"Content-Type": "application/x-www-form-urlencoded"}, 403),
    ("/try", _try(), {**FORM, "Origin": "null"}, 403),
    ("/try", _try(), {**FORM, "Origin": "http://127.0.0.1.evil.example"}, 403),
    ("/try", _try(), {**FORM, "Content-Type": "text/plain"}, 415),
    ("/try", _try(), {**FORM, "Content-Type": "multipart/form-data; boundary=x"}, 415),
    ("/try", _try(csrf_token=""), FORM, 403),
    ("/try", _try(kind="<script>"), FORM, 400),
    ("/try", _try(name="../../x"), FORM, 400),
    ("/try", _try(), FORM, 404),  # the server is unreachable: its tool list is the error
    ("/catalogue/add", {"csrf_token": TOKEN, "entry": "<x>"}, FORM, 404),
    (
        "/catalogue/add",
        {"csrf_token": TOKEN, "entry": "io.github.modelcontextprotocol/time", "object_name": "-x-"},
        FORM,
        422,
    ),
    (
        "/catalogue/add",
        {
            "csrf_token": TOKEN,
            "entry": "io.github.modelcontextprotocol/time",
            "object_name": "t",
            "env.X": "1",
        },
        FORM,
        422,
    ),
    (
        "/catalogue/add",
        {
            "csrf_token": TOKEN,
            "entry": "io.github.modelcontextprotocol/time",
            "object_name": "t",
            "arg.local-timezone": "UTC\n--evil",
        },
        FORM,
        422,
    ),
    (
        "/catalogue/add",
        {
            "csrf_token": TOKEN,
            "entry": "io.github.modelcontextprotocol/time",
            "object_name": "t",
            "group": "<b>",
        },
        FORM,
        422,
    ),
    ("/", {"csrf_token": TOKEN}, FORM, 405),
]


@pytest.mark.parametrize(("path", "body", "headers", "status"), CORPUS_POST)
def test_hostile_post_corpus(
    client: TestClient, path: str, body: bytes | dict[str, str], headers: dict[str, str], status: int
) -> None:
    answer = (
        client.post(path, content=body, headers=headers)
        if isinstance(body, bytes)
        else client.post(path, data=body, headers=headers)
    )
    assert_sane(answer.status_code, answer.content, (path, body if isinstance(body, dict) else body[:80]))
    assert answer.status_code == status, (path, answer.text[:300])


@pytest.mark.parametrize(
    "host",
    ["evil.example", "127.0.0.1.evil.example:8765", "localhost.evil:1", "", "[::2]:8765", "0.0.0.0:8765"],
)
def test_foreign_host_is_refused(client: TestClient, host: str) -> None:
    answer = client.get("/", headers={"Host": host})
    assert answer.status_code == 421, host


def test_schema_arguments_corpus() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "number"}, "i": {"type": "integer"}, "o": {"type": "object"}},
    }
    for form, problem in [
        ({"arg.n": "nan"}, "n: expected a finite number"),
        ({"arg.n": "1e999"}, "n: expected a finite number"),
        ({"arg.i": "1" * 5000}, "i: expected an integer"),  # past int()'s digit limit
        ({"arg.o": "[" * 5000 + "]" * 5000}, "o:"),
        ({"arg.o": "{" * 20}, "o: not valid JSON"),
    ]:
        try:
            schemaform.arguments(schema, form)
        except schemaform.ArgumentError as exc:
            assert problem is not None and str(exc).startswith(problem), (form, exc)
        else:
            assert problem is None, form
    deep = {"arguments": __import__("json").dumps(nested(200))}
    with pytest.raises(schemaform.ArgumentError, match="nested deeper"):
        schemaform.arguments({"type": "object"}, deep)


# -- properties -----------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(sorted(name for name, _ in attrs))))


def tags(html: str) -> list[tuple[str, tuple[str, ...]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


ENV = templates()


def _render_server_data(
    name: str, title: str, description: str, prop: str, prop_text: str, result: str
) -> str:
    schema = {
        "type": "object",
        "properties": {
            prop: {"type": "string", "description": prop_text},
            "flag": {"type": "boolean"},
            "pick": {"enum": [prop_text, "b"]},
        },
        "required": [prop],
    }
    tool = live.Tool(name=name, title=title, description=description, schema=schema)
    row = type("Row", (), {"kind": "MCPServer", "name": "s"})()
    lists = live.Lists(
        tools=[tool],
        prompts=[live.Named(name, description)],
        resources=[live.Named(title, description)],
        error=description,
    )
    call = live.CallResult(parts=[live.Part("text", text=result)], is_error=True, structured=result)
    common = {"csrf_field": "csrf_token", "csrf_token": "t", "path": "/try", "title": name}
    return "".join(
        [
            ENV.get_template("try.html").render(
                **common,
                kind="MCPServer",
                name="s",
                tool=tool,
                fields=schemaform.fields(schema),
                whole="arguments",
                no_input=False,
                schema_text=prop_text,
            ),
            ENV.get_template("lists.html").render(lists=lists, row=row),
            ENV.get_template("result.html").render(result=call, problem=""),
            ENV.get_template("result.html").render(result=None, problem=result),
        ]
    )


@SETTINGS
@given(hostile_text, hostile_text, hostile_text, hostile_text, hostile_text, hostile_text)
def test_server_data_never_becomes_markup(
    name: str, title: str, description: str, prop: str, prop_text: str, result: str
) -> None:
    plain = _render_server_data("n", "t", "d", "p", "x", "r")
    hostile = _render_server_data(name, title, description, prop, prop_text, result)
    assert tags(hostile) == tags(plain)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@SETTINGS
@given(
    st.dictionaries(st.text(max_size=20), json_values, max_size=6),
    st.dictionaries(st.text(max_size=30), st.text(max_size=50), max_size=8),
)
def test_any_schema_and_form_give_arguments_or_a_named_refusal(
    schema_properties: dict[str, Any], form: dict[str, str]
) -> None:
    schema = {"type": "object", "properties": schema_properties, "required": list(schema_properties)[:2]}
    try:
        shown = schemaform.fields(schema)
        out = schemaform.arguments(schema, form)
    except schemaform.ArgumentError as exc:
        names = {f.name for f in schemaform.fields(schema)} | {schemaform.WHOLE}
        assert any(str(exc).startswith(name + ":") for name in names), exc
    else:
        assert isinstance(out, dict) and set(out) <= {f.name for f in shown}


@SETTINGS
@given(
    st.sampled_from(
        [
            "/catalogue?q=",
            "/audit?who=",
            "/audit?tool=",
            "/try?kind=MCPServer&name=idle&tool=",
            "/objects/MCPServer/",
        ]
    ),
    st.text(max_size=600),
)
def test_hostile_query_values_get_an_answer_not_a_crash(client: TestClient, prefix: str, value: str) -> None:
    from urllib.parse import quote

    answer = client.get(prefix + quote(value, safe=""))
    assert_sane(answer.status_code, answer.content, (prefix, value))
    assert answer.status_code in (200, 400, 404, 409, 414, 422)


origins = st.one_of(
    st.builds(
        "{}://{}{}".format,
        st.sampled_from(["http", "https", "ws", "file"]),
        st.from_regex(r"[a-z0-9.\[\]:-]{1,30}", fullmatch=True),
        st.sampled_from(["", ":1", ":8765", ":80@evil.example"]),
    ),
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=60),
)


@SETTINGS
@given(origins)
def test_foreign_origins_are_refused(client: TestClient, origin: str) -> None:
    from hypothesis import assume

    assume(not any(origin.startswith(f"http://{h}:") for h in ("127.0.0.1", "localhost", "[::1]")))
    assert client.get("/", headers={"Origin": origin}).status_code == 403
    assert client.post("/try", data=_try(), headers={**FORM, "Origin": origin}).status_code == 403


@SETTINGS
@given(
    st.dictionaries(st.text(max_size=30), st.text(max_size=100), max_size=10),
    st.sampled_from(["/try", "/catalogue/add"]),
)
def test_posts_without_the_token_never_reach_a_route(
    client: TestClient, form: dict[str, str], path: str
) -> None:
    form.pop("csrf_token", None)
    answer = client.post(path, data=form, headers=FORM)
    assert answer.status_code == 403 and b"csrf_token" in answer.content


@SETTINGS
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "kind",
                "name",
                "tool",
                "arg.x",
                "arguments",
                "entry",
                "object_name",
                "group",
                "env.A",
                "arg.local-timezone",
            ]
        ),
        st.text(max_size=200),
    ),
    st.sampled_from(["/try", "/catalogue/add"]),
)
def test_hostile_forms_with_the_token_get_an_answer_not_a_crash(
    client: TestClient, form: dict[str, str], path: str
) -> None:
    answer = client.post(path, data={**form, "csrf_token": TOKEN}, headers={**FORM, "HX-Request": "true"})
    assert_sane(answer.status_code, answer.content, (path, form))
    assert answer.status_code in (200, 400, 404, 409, 422), answer.text[:300]


def test_added_files_stay_in_the_fleet_folder(client: TestClient, tmp_path: Path) -> None:
    """Whatever the form says, add-to-fleet writes only `<folder>/<dns-label>.yaml`."""
    for name in ("../../escape", "/abs", "a/b", "x" * 64, "LOUD", "ok-name"):
        answer = client.post(
            "/catalogue/add",
            data={"csrf_token": TOKEN, "entry": "io.github.modelcontextprotocol/time", "object_name": name},
            headers=FORM,
        )
        assert (answer.status_code == 200) == (name == "ok-name"), (name, answer.text[:200])
