"""`git` source: a file at a branch, tag or commit of a git repository, read with the `git` CLI.

A private bare-ish work directory per source keeps fetches shallow and incremental:
`git fetch --depth 1 origin <ref>` then `git show FETCH_HEAD:<path>`.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import tempfile
from pathlib import Path

from mcpfleet.registry.sources.base import Fetched, SourceError, fetched_bytes

_TIMEOUT = 120.0


class GitReader:
    def __init__(
        self,
        source: str,
        fmt: str,
        repository: str,
        path: str,
        branch: str | None = None,
        tag: str | None = None,
        commit: str | None = None,
        username: str | None = None,
        password_file: Path | None = None,
    ) -> None:
        self.source, self.fmt, self.repository, self.path = source, fmt, repository, path.lstrip("/")
        self.username, self.password_file = username, password_file
        if commit:
            self.ref = commit
        elif tag:
            self.ref = f"refs/tags/{tag}"
        elif branch:
            self.ref = f"refs/heads/{branch}"
        else:
            self.ref = "HEAD"
        self._dir: Path | None = None

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
        if self.username is not None and self.password_file is not None:
            try:
                password = self.password_file.read_text().strip()
            except OSError as exc:
                raise SourceError(
                    f"cannot read git passwordFile {self.password_file}: {exc.strerror}"
                ) from None
            token = base64.b64encode(f"{self.username}:{password}".encode()).decode()
            # Through the environment, not argv: command lines are visible to every user of the machine.
            env.update(
                {
                    "GIT_CONFIG_COUNT": "1",
                    "GIT_CONFIG_KEY_0": "http.extraHeader",
                    "GIT_CONFIG_VALUE_0": f"Authorization: Basic {token}",
                }
            )
        return env

    async def _git(self, *args: str) -> bytes:
        command = args[2] if args[0] == "-C" else args[0]
        env = self._env()
        proc = await asyncio.create_subprocess_exec(
            "git", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), _TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise SourceError(f"git {command} timed out after {_TIMEOUT:.0f}s") from None
        if proc.returncode != 0:
            message = err.decode(errors="replace").strip().splitlines()
            raise SourceError(f"git {command} failed: {message[-1] if message else proc.returncode}")
        return out

    async def fetch(self) -> Fetched:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix=f"mcpfleet-registry-git-{self.source}-"))
            await self._git("init", "-q", str(self._dir))
            await self._git("-C", str(self._dir), "remote", "add", "origin", self.repository)
        await self._git("-C", str(self._dir), "fetch", "-q", "--depth", "1", "origin", self.ref)
        try:
            content = await self._git("-C", str(self._dir), "show", f"FETCH_HEAD:{self.path}")
        except SourceError as exc:
            raise SourceError(f"{self.path} not found at {self.ref}: {exc}") from None
        return fetched_bytes(self.source, self.fmt, content)

    async def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
