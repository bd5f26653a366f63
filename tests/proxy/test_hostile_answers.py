"""Hostile stdio-server answers against a real proxy, both eras (issue 27, defect 4).

The proxy's other hostile suites attack it from the client side; here the stdio server is the
attacker (`deep_server.py`, told by each `tools/call` what to answer): the answers of
`tests.hostile_answers.ANSWER_CORPUS` (corpus) and generated ones (property test: nesting up to
400 levels anywhere, malformed `error` members). Every answer: no 5xx, no traceback in the body or
the log, the client gets an answer to its request; one nested deeper than `MAX_ANSWER_DEPTH` is an
error naming the server. The proxy relays without reading, so a malformed error goes through as is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from mcpfleet.jsonrpc import MAX_ANSWER_DEPTH
from tests.hostile import (
    LEGACY,
    META,
    MODERN,
    assert_sane,
    encode,
    error_log,
    legacy_headers,
    modern_headers,
    open_session,
    post,
)
from tests.hostile_answers import ANSWER_CORPUS, answer_depth, hostile_answers
from tests.proxy.test_deep_answers import _start


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "authz"])
def proxy(request: pytest.FixtureRequest) -> Iterator[str]:
    servers, base = _start(request.param)
    try:
        yield base
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def sid(proxy: str) -> str:
    return open_session(proxy)


def _call(base: str, era: str, sid: str, members: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": 11, "method": "tools/call"}
    msg["params"] = {"name": "t", "arguments": {"answer": encode(members).decode()}}
    if era == MODERN:
        msg["params"]["_meta"] = META
    headers = modern_headers(msg) if era == MODERN else legacy_headers(sid)
    reply = post(base, orjson.dumps(msg), headers, until=b'"id":11')
    assert_sane(reply, members)
    answers = [m for m in reply.messages() if isinstance(m, dict) and m.get("id") == 11]
    assert answers, (reply.status, reply.body[:300])
    return dict(answers[0])


def _invalid(answer: dict[str, Any]) -> str:
    message = str(answer["error"]["message"])
    assert "server '" in message and "sent an invalid answer" in message, answer
    return message


def _check(answer: dict[str, Any], members: dict[str, Any], kind: str | None = None) -> None:
    if answer_depth(members) > MAX_ANSWER_DEPTH:
        assert f"nested deeper than {MAX_ANSWER_DEPTH} levels" in _invalid(answer)
    elif kind == "malformed":
        _invalid(answer)
    else:
        assert isinstance(answer.get("result"), dict) or isinstance(answer.get("error"), dict), answer


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize(
    ("members", "kind"), [(m, k) for _, m, k in ANSWER_CORPUS], ids=[n for n, _, _ in ANSWER_CORPUS]
)
def test_answer_corpus(proxy: str, sid: str, era: str, members: dict[str, Any], kind: str) -> None:
    with error_log() as log:
        _check(_call(proxy, era, sid, members), members, kind)
    assert not log.tracebacks(), log.tracebacks()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_generated_answers(proxy: str, sid: str, era: str) -> None:
    @given(members=hostile_answers())
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(members: dict[str, Any]) -> None:
        _check(_call(proxy, era, sid, members), members)

    with error_log() as log:
        run()
    assert not log.tracebacks(), log.tracebacks()[:5]
