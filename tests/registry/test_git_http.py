"""The git source over smart HTTP with basic auth (git-http-backend behind a small CGI bridge)."""

from __future__ import annotations

import base64
import contextlib
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.registry.conftest import make_config, running, server_doc, write_json

BACKEND = Path("/usr/lib/git-core/git-http-backend")
USER, PASSWORD = "reader", "s3cret-token"


def _handler(root: Path) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def _cgi(self) -> None:
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "REMOTE_USER": USER,
                "PATH": "/usr/bin:/bin",
            }
            out = subprocess.run([str(BACKEND)], input=body, env=env, capture_output=True, check=True).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode().split("\r\n"):
                key, _, value = line.partition(":")
                if key.lower() == "status":
                    status = int(value.strip().split()[0])
                elif key:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _cgi
        do_POST = _cgi

    return Handler


@contextlib.contextmanager
def serve_http_repo(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A bare repository with `registry.json` (one server, com.example/private) served over smart HTTP
    at the yielded URL, answering only requests with basic auth USER / PASSWORD."""
    if not BACKEND.exists():
        pytest.fail(f"{BACKEND} is missing: the git package provides it (apt-get install -y git)")
    work = tmp_path / "work"
    work.mkdir()
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "PATH": "/usr/bin:/bin",
    }

    def git(*args: str, cwd: Path = work) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    write_json(work / "registry.json", [server_doc("com.example/private")])
    git("add", ".")
    git("commit", "-qm", "one")
    served = tmp_path / "served"
    served.mkdir()
    git("clone", "-q", "--bare", str(work), str(served / "r.git"), cwd=tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/r.git", tmp_path
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def http_repo(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with serve_http_repo(tmp_path) as served:
        yield served


async def test_git_over_http_with_basic_auth(http_repo: tuple[str, Path]) -> None:
    url, tmp = http_repo
    (tmp / "pw").write_text(PASSWORD + "\n")
    (tmp / "wrong").write_text("nope")
    sources = [
        {
            "name": "ok",
            "git": {
                "repository": url,
                "branch": "main",
                "path": "registry.json",
                "auth": {"username": USER, "passwordFile": "pw"},
            },
        },
        {
            "name": "bad",
            "git": {
                "repository": url,
                "path": "registry.json",
                "auth": {"username": USER, "passwordFile": "wrong"},
            },
        },
        {"name": "none", "git": {"repository": url, "path": "registry.json"}},
    ]
    cfg = make_config(sources, f"sqlite+aiosqlite:///{tmp / 'g.db'}")
    async with running(cfg, tmp) as h:
        await h.sync()
        status = {s["name"]: s for s in (await h.get("/status")).json()["sources"]}
        assert status["ok"]["lastError"] is None and status["ok"]["entries"] == 1
        for name in ("bad", "none"):
            assert "git fetch failed: fatal: Authentication failed" in status[name]["lastError"], status[
                name
            ]["lastError"]
            assert PASSWORD not in status[name]["lastError"] and "nope" not in status[name]["lastError"]
        names = [s["server"]["name"] for s in (await h.get("/v0.1/servers")).json()["servers"]]
        assert names == ["com.example/private"]
