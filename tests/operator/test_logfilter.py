"""The operator's log: one line per API connectivity change, not kopf's line per failed attempt.

The records are the ones kopf 1.x writes (`kopf._cogs.clients.api.request`), fed through the
handler filter the operator installs.
"""

from __future__ import annotations

import logging

from mcpfleet.operator.logfilter import ApiConnectivityFilter

URL = "GET https://127.0.0.1:6443/apis/mcpfleet.dev/v1alpha1/namespaces/default/mcpservers"
REFUSED = "ClientConnectorError(ConnectionKey(host='127.0.0.1', port=6443), ConnectionRefusedError(111))"


def _record(level: int, message: str, name: str = "kopf._cogs.clients.watching") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def _shown(flt: ApiConnectivityFilter, records: list[logging.LogRecord]) -> list[str]:
    return [f"{r.levelname} {r.getMessage()}" for r in records if flt.filter(r)]


def test_a_starting_api_server_is_retried_quietly() -> None:
    flt = ApiConnectivityFilter(logging.WARNING)
    records = [
        _record(
            logging.ERROR,
            f"Request attempt #1/9 failed; will retry: {URL} -> "
            "APITooManyRequestsError('storage is (re)initializing', {'kind': 'Status'})",
        ),
        _record(
            logging.ERROR,
            f"Request attempt #1/9 failed; will retry: {URL} -> APIServerError('the request has been made "
            "before all known HTTP paths have been installed, please try again')",
        ),
        _record(logging.DEBUG, f"Request attempt #2/9 succeeded: {URL}"),
    ]
    assert _shown(flt, records) == []


def test_a_lost_api_server_is_one_line_then_one_line_when_it_is_back() -> None:
    flt = ApiConnectivityFilter(logging.WARNING)

    def failures() -> list[logging.LogRecord]:  # fresh records: the filter rewrites the one it shows
        retries = [f"Request attempt #{n}/9 failed; will retry: {URL} -> {REFUSED}" for n in range(1, 9)]
        last = f"Request attempt #9/9 failed; escalating: {URL} -> {REFUSED}"
        return [_record(logging.ERROR, message) for message in [*retries, last]]

    shown = _shown(flt, [r for _ in range(10) for r in failures()])  # ~90 lines a minute from kopf
    assert len(shown) == 1
    assert shown[0].startswith("WARNING Kubernetes API server unreachable (ClientConnectorError(")
    assert "retrying with back-off" in shown[0]
    back = _shown(flt, [_record(logging.DEBUG, f"Request attempt #3/9 succeeded: {URL}") for _ in range(3)])
    assert len(back) == 1 and back[0].startswith("INFO Kubernetes API server answers again (after ")
    # Other watches failing once more while they reconnect are the same outage ending: no new line.
    again = _shown(flt, [*failures()[:1], _record(logging.DEBUG, f"Request attempt #2/9 succeeded: {URL}")])
    assert again == []


def test_other_records_keep_their_levels() -> None:
    flt = ApiConnectivityFilter(logging.WARNING)
    assert flt.filter(_record(logging.INFO, "operator synced", name="mcpfleet.operator"))
    assert not flt.filter(_record(logging.DEBUG, "Request attempt #2/9: GET …"))
    assert flt.filter(_record(logging.ERROR, "Something else failed", name="kopf._cogs.clients.api"))
