"""One clear log line per Kubernetes API connectivity change, instead of kopf's retry lines.

kopf logs every failed API request attempt at ERROR: three `429 storage is (re)initializing`
lines at every start against a fresh API server, and about 90 lines a minute for as long as the
API server is gone. This filter sits on the operator's log handler and:

- drops the retries of a starting API server (429 "storage is (re)initializing", 503 "before all
  known HTTP paths have been installed"): it asked us to come back later, and kopf does;
- turns the first other failed attempt into one WARNING ("unreachable … retrying with back-off")
  and drops the following ones while it stays unreachable;
- turns the first successful retry afterwards into one INFO ("answers again after N s").

kopf's request retries keep their own back-off; nothing here changes what is retried or when.
"""

from __future__ import annotations

import logging
import re
import time

_ATTEMPT = re.compile(r"^Request attempt #\d+(?:/\d+)? (failed|succeeded)")
_CLIENT_LOGGERS = "kopf._cogs.clients"
TRANSIENT = (
    "APITooManyRequestsError",  # 429, e.g. "storage is (re)initializing"
    "before all known HTTP paths have been installed",  # 503 while the API server starts
)
SETTLE_SECONDS = 10.0


class ApiConnectivityFilter(logging.Filter):
    """A handler filter; `threshold` is the level kopf's other records must reach to be shown."""

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold
        self.down_since: float | None = None
        self.up_since: float | None = None
        self.reported = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(_CLIENT_LOGGERS):
            return True
        message = record.getMessage()
        match = _ATTEMPT.match(message)
        if match is None:
            return record.levelno >= self.threshold
        now = time.monotonic()
        if match.group(1) == "succeeded":
            if self.down_since is None:
                return False
            seconds = now - self.down_since
            reported, self.down_since, self.up_since = self.reported, None, now
            if not reported:
                return False
            self._rewrite(record, logging.INFO, f"Kubernetes API server answers again (after {seconds:.0f}s)")
            return True
        if "will retry" in message and any(t in message for t in TRANSIENT):
            return False  # the API server is starting: it asked us to come back, and kopf does
        if self.down_since is not None:
            return False
        self.down_since = now
        # Watches recover one by one: a failure right after a recovery is the same outage ending,
        # not a new one worth a line.
        self.reported = self.up_since is None or now - self.up_since >= SETTLE_SECONDS
        if not self.reported:
            return False
        cause = message.rsplit(" -> ", 1)[-1] if " -> " in message else message
        self._rewrite(
            record,
            logging.WARNING,
            f"Kubernetes API server unreachable ({cause[:300]}); retrying with back-off, "
            "quietly until it answers again",
        )
        return True

    @staticmethod
    def _rewrite(record: logging.LogRecord, level: int, message: str) -> None:
        record.levelno, record.levelname = level, logging.getLevelName(level)
        record.msg, record.args = message, None
        record.name = "mcpfleet.operator.api"


def install(handler: logging.Handler, kopf_level: int) -> None:
    """Filter `handler`; kopf's client loggers go to DEBUG so a successful retry is seen (and
    dropped unless it ends an outage)."""
    handler.addFilter(ApiConnectivityFilter(kopf_level))
    logging.getLogger(_CLIENT_LOGGERS).setLevel(logging.DEBUG)
