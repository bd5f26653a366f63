"""The policy layer finds the answer to a request in a peeked SSE body as a client would read it."""

from __future__ import annotations

import orjson
import pytest

from mcpfleet.policy.asgi import _find_response

ANSWER = {"jsonrpc": "2.0", "id": 7, "result": {"isError": True, "content": []}}


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_any_line_ending(eol: bytes) -> None:
    body = b"event: message" + eol + b"data: " + orjson.dumps(ANSWER) + eol + eol
    assert _find_response(body, 7) == ANSWER


def test_data_split_over_lines_and_a_leading_bom() -> None:
    text = orjson.dumps(ANSWER)
    cut = text.index(b",") + 1  # data lines join with LF: whitespace between two JSON tokens
    body = b"\xef\xbb\xbfdata: " + text[:cut] + b"\ndata: " + text[cut:] + b"\n\n"
    assert _find_response(body, 7) == ANSWER


def test_notifications_and_other_ids_are_not_the_answer() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}, "id": 7}
    other = {"jsonrpc": "2.0", "id": 8, "result": {}}
    body = b"".join(b"data: " + orjson.dumps(m) + b"\n\n" for m in (note, other))
    assert _find_response(body, 7) is None


def test_a_cut_off_event_is_not_an_answer() -> None:
    assert _find_response(b"data: " + orjson.dumps(ANSWER)[:-3], 7) is None
