"""The events timeline and the Kubernetes source's reading of API objects, with hostile input: any
Event or object the API could answer (any JSON shape) gives a bounded entry or object, never an
exception; any text in them renders as plain text. And a local fleet's timeline on the fleet page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.console import fleetview, live, timeline
from mcpfleet.console.kubesource import stored
from tests.console.conftest import failed, manifest, running, write_state
from tests.console.test_hostile import ENV, SETTINGS, hostile_text, json_values, tags

MakeClient = Callable[[Path], httpx.AsyncClient]
documents = st.dictionaries(
    st.sampled_from(
        [
            "involvedObject",
            "reason",
            "message",
            "type",
            "count",
            "lastTimestamp",
            "eventTime",
            "metadata",
            "kind",
            "status",
            "spec",
        ]
    ),
    json_values,
    max_size=8,
)


@SETTINGS
@given(documents)
def test_any_api_event_gives_a_bounded_entry(document: dict[str, Any]) -> None:
    event = timeline.from_kubernetes(document)
    assert len(event.message) <= timeline.MESSAGE_CHARS + 1
    assert len(event.reason) <= 200 and len(event.kind) <= 100 and len(event.name) <= 253
    assert event.count >= 1
    assert isinstance(event.ago, str)


@SETTINGS
@given(documents)
def test_any_api_object_gives_an_object_or_nothing_worse(document: dict[str, Any]) -> None:
    obj = stored(document)
    assert isinstance(obj.status, dict) and isinstance(obj.manifest, dict)
    assert "status" not in obj.manifest and "managedFields" not in obj.manifest["metadata"]


def _render(kind: str, name: str, reason: str, message: str) -> str:
    events = [
        timeline.Event("2026-01-01T00:00:00Z", kind, name, reason, message, warning=True, count=2),
        timeline.Event("2026-01-01T00:00:00Z", kind, name, reason, message, warning=False),
    ]
    return "".join(
        ENV.get_template("events.html").render(events=events, events_problem="", on_kubernetes=on_kubernetes)
        for on_kubernetes in (True, False)
    ) + ENV.get_template("events.html").render(events=[], events_problem=message, on_kubernetes=True)


@SETTINGS
@given(hostile_text, hostile_text, hostile_text, hostile_text)
def test_event_texts_never_become_markup(kind: str, name: str, reason: str, message: str) -> None:
    assert tags(_render(kind, name, reason, message)) == tags(_render("k", "n", "r", "m"))


def test_the_timeline_is_newest_first_and_bounded() -> None:
    events = [
        timeline.Event(f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z", "MCPServer", "s", "r", "", False)
        for i in range(timeline.MAX_EVENTS * 2)
    ]
    shown = timeline.newest_first(events)
    assert len(shown) == timeline.MAX_EVENTS
    assert shown[0].time == events[-1].time and shown == sorted(shown, key=lambda e: e.time, reverse=True)


def test_kubernetes_event_times_and_counts() -> None:
    event = timeline.from_kubernetes(
        {
            "involvedObject": {"kind": "MCPServer", "name": "s"},
            "eventTime": "2026-01-01T00:00:00.123456Z",
            "reason": "Started",
            "type": "Normal",
            "count": "many",
        }
    )
    assert (event.time, event.count, event.warning) == ("2026-01-01T00:00:00Z", 1, False)


async def test_a_local_fleet_shows_its_transitions(tmp_path: Path, console_client: MakeClient) -> None:
    state_dir = tmp_path / ".mcpfleet"
    await write_state(
        state_dir,
        [
            (manifest("MCPServer", "good", {"image": "x"}), running("http://127.0.0.1:1/mcp")),
            (manifest("MCPServer", "bad", {"image": "x"}), failed("exit 1: <b>boom</b>")),
        ],
    )
    page = await console_client(state_dir).get("/")
    assert page.status_code == 200
    assert '<h2 id="events-heading">Timeline</h2>' in page.text
    assert (
        'class="warning"' in page.text
        and "MCPServer/bad" in page.text
        and "Ready=False (Crashed)" in page.text
    )
    assert "MCPServer/good" in page.text and "Ready=True (Ready)" in page.text
    table = await console_client(state_dir).get("/fleet/table", headers={"HX-Request": "true"})
    assert "MCPServer/bad" in table.text
    one = await console_client(state_dir).get("/objects/MCPServer/bad")
    assert "Ready=False (Crashed)" in one.text and "MCPServer/good" not in one.text


@SETTINGS
@given(
    st.dictionaries(
        st.sampled_from(["metadata", "status"]),
        json_values
        | st.fixed_dictionaries(
            {
                "containerStatuses": st.lists(
                    st.dictionaries(
                        st.sampled_from(["name", "ready", "restartCount", "state"]),
                        json_values
                        | st.fixed_dictionaries(
                            {"waiting": st.dictionaries(st.sampled_from(["reason", "message"]), hostile_text)}
                        ),
                    ),
                    max_size=3,
                )
            }
        ),
    )
)
def test_any_api_pod_gives_a_bounded_row(pod: dict[str, Any]) -> None:
    row = fleetview.pod_row(pod)
    assert len(row.reason) <= fleetview.POD_REASON_CHARS and row.restarts >= 0
    assert row.ready.count("/") == 1


def test_a_crash_looping_pod_says_why() -> None:
    row = fleetview.pod_row(
        {
            "metadata": {"name": "s-1"},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "mcp",
                        "ready": False,
                        "restartCount": 4,
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                    }
                ],
            },
        }
    )
    assert (row.ready, row.restarts, row.reason) == ("0/1", 4, "mcp: CrashLoopBackOff back-off 40s")


@SETTINGS
@given(json_values)
def test_any_find_tool_answer_gives_rows_or_none(data: Any) -> None:
    for tool in live.found_tools(data):
        assert len(tool.name) <= 201 and len(tool.description) <= 2001


def _found_page(name: str, description: str) -> str:
    data = {"tools": [{"name": name, "description": description, "score": 0.5}]}
    result = live.CallResult(parts=[live.Part("text", text=description)], structured=description, data=data)
    return ENV.get_template("found.html").render(result=result, found=live.found_tools(data), problem="")


@SETTINGS
@given(hostile_text, hostile_text)
def test_find_tool_answers_never_become_markup(name: str, description: str) -> None:
    assert tags(_found_page(name, description)) == tags(_found_page("n", "d"))


def test_find_tool_rows() -> None:
    data = {"tools": [{"name": "a_b", "description": "x", "score": 0.8195}, {"name": 3}, "junk"], "more": 1}
    assert live.found_tools(data) == [live.FoundTool("a_b", "x", "0.82")]
    assert live.found_tools({"tools": "nope"}) == [] and live.found_tools(None) == []
