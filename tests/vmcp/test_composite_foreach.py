"""forEach steps and structured output under hostile input: a client picks the collection (through
`params`) and the values the output templates read, so whatever it sends, a forEach step calls the
tool once per item and never more than `maxIterations` / `maxParallel` allow, or refuses before any
call; and the output is always the declared shape (property tests over the runner, no network)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.api.gatewayconfig import CompositeTool
from mcpfleet.vmcp.composite import CompositeRunner, output_schema

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _tool(max_iterations: int, max_parallel: int) -> CompositeTool:
    return CompositeTool.model_validate(
        {
            "name": "loop",
            "steps": [
                {
                    "id": "each",
                    "type": "forEach",
                    "collection": "{{.params.items}}",
                    "maxIterations": max_iterations,
                    "maxParallel": max_parallel,
                    "step": {
                        "tool": "b.echo",
                        "arguments": {"value": "{{.forEach.item}}", "i": "{{.forEach.index}}"},
                    },
                }
            ],
            "output": {
                "properties": {
                    "count": {"type": "integer", "value": "{{.steps.each.output.count}}"},
                    "first": {"type": "string", "value": "{{.params.first}}"},
                    "number": {"type": "number", "value": "{{.params.first}}"},
                    "flag": {"type": "boolean", "value": "{{.params.raw}}"},
                    "list": {"type": "array", "value": "{{.params.raw}}"},
                    "raw": {"type": "object", "value": "{{.params.raw}}"},
                },
                "required": ["count"],
            },
        }
    )


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.running = 0
        self.most = 0

    async def __call__(
        self, tool: str, args: dict[str, Any], ctx: Any, limit: float | None
    ) -> dict[str, Any]:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(0)
            self.calls.append(args)
            return {"content": [{"type": "text", "text": json.dumps(args, default=str)}], "isError": False}
        finally:
            self.running -= 1


@settings(max_examples=200, deadline=None)
@given(
    items=JSON,
    first=JSON | st.sampled_from(["nan", "inf", "-inf", "1e999", "12", "1.5"]),
    raw=JSON,
    max_iterations=st.integers(min_value=0, max_value=12),
    max_parallel=st.integers(min_value=0, max_value=5),
)
def test_for_each_calls_once_per_item_within_its_bounds(
    items: Any, first: Any, raw: Any, max_iterations: int, max_parallel: int
) -> None:
    tool = _tool(max_iterations, max_parallel)
    recorder = Recorder()
    result = asyncio.run(
        CompositeRunner(recorder).run(tool, {"items": items, "first": first, "raw": raw}, None)
    )
    limit = max_iterations or 100
    collection = items
    if isinstance(items, str):
        try:
            collection = json.loads(items)
        except ValueError:
            collection = items
    if not isinstance(collection, list) or len(collection) > limit:
        assert result["isError"] is True and recorder.calls == []  # refused before any call
        return
    assert not result["isError"], result
    assert len(recorder.calls) == len(collection)
    assert sorted(c["i"] for c in recorder.calls) == list(range(len(collection)))
    assert recorder.most <= (max_parallel or 10)
    out = result["structuredContent"]
    assert out["count"] == len(collection)
    schema = output_schema(tool)
    assert schema is not None
    jsonschema.validate(out, schema)  # whatever the client sent, the answer matches the outputSchema
