"""Audit files are private to their owner (issue 27 risk).

Before: created 0644 (the umask's default), world-readable, while each line names the caller, its
address and the `sessionId` - the only key of a caller on an anonymous gateway.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mcpfleet.api.policy import AuditConfig
from mcpfleet.policy.audit import AuditLog
from mcpfleet.policy.guard import audit_log, load_audit


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_audit_file_is_created_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        audit_log(AuditConfig(enabled=True, log_file="audit.jsonl"), "vmcp", tmp_path).close()
    finally:
        os.umask(old)
    assert _mode(tmp_path / "audit.jsonl") == 0o600


def test_an_existing_wider_audit_file_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text('{"old": "line"}\n')
    path.chmod(0o644)
    log = AuditLog(AuditConfig(enabled=True, log_file=str(path)), "proxy")
    log.close()
    assert _mode(path) == 0o600
    assert path.read_text() == '{"old": "line"}\n'  # appended to, never truncated


def test_a_missing_folder_is_an_error_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "audit.json"
    missing = tmp_path / "nope" / "audit.jsonl"
    config.write_text(f'{{"enabled": true, "logFile": "{missing}"}}')
    with pytest.raises(ValueError, match="logFile: cannot open"):
        load_audit(str(config), "proxy")
    assert not missing.parent.exists()  # not created behind the operator's back
