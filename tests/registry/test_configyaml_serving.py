"""A configYAML MCPRegistry end to end in the registry server: ToolHive's `auth.mode: oauth` enforced on
reads (a real local OIDC issuer), the public paths open, ToolHive's `/registry/<name>/v0.1` path, and
the file source with its filter — the config built by the same translation both platforms use."""

from __future__ import annotations

from pathlib import Path

import yaml

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.reconcile import mcpregistry
from mcpfleet.reconcile.model import World
from mcpfleet.registry.config import parse_config
from tests.auth.test_token_corpus import local_issuer
from tests.registry.conftest import running, server_doc, write_json


def _registry(config: dict[str, object]) -> MCPRegistry:
    model = parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1beta1",
            "kind": "MCPRegistry",
            "metadata": {"name": "private", "namespace": "team"},
            "spec": {"configYAML": yaml.safe_dump(config)},
        }
    )
    assert isinstance(model, MCPRegistry)
    return model


async def test_oauth_mode_guards_reads_and_the_toolhive_path_answers(tmp_path: Path) -> None:
    data = write_json(tmp_path / "data.json", [server_doc("com.acme/tool"), server_doc("com.acme/other")])
    async with local_issuer() as issuer:
        registry = _registry(
            {
                "sources": [
                    {
                        "name": "local",
                        "file": {"path": str(data)},
                        "filter": {"names": {"exclude": ["com.acme/other"]}},
                    }
                ],
                "registries": [{"name": "main", "sources": ["local"]}],
                "auth": {
                    "mode": "oauth",
                    "publicPaths": ["/openapi.json"],
                    "oauth": {
                        "resourceUrl": "http://127.0.0.1/registry",
                        "providers": [
                            {"name": "local", "issuerUrl": issuer.base, "audience": "mcp-registry"}
                        ],
                    },
                },
            }
        )
        plan = mcpregistry.plan(registry, World(platform="local", namespace="team"))
        assert plan.problems == ()
        config = parse_config(yaml.safe_load(plan.config_files[0].content))
        async with running(config, tmp_path) as h:
            await h.sync()
            denied = await h.get("/v0.1/servers")
            assert denied.status_code == 401 and "Bearer" in denied.headers["www-authenticate"]
            wrong = issuer.token("r1", aud="someone-else")
            assert (
                await h.get("/v0.1/servers", headers={"authorization": f"Bearer {wrong}"})
            ).status_code == 401
            good = {"authorization": f"Bearer {issuer.token('r1', aud='mcp-registry')}"}
            for path in ("/v0.1/servers", "/registry/main/v0.1/servers"):
                answer = await h.get(path, headers=good)
                assert answer.status_code == 200, answer.text
                assert [s["server"]["name"] for s in answer.json()["servers"]] == ["com.acme/tool"]
            for public in ("/health", "/version", "/openapi.json"):
                assert (await h.get(public)).status_code == 200, public
            assert (await h.get("/registry/other/v0.1/servers", headers=good)).status_code == 404


async def test_anonymous_mode_reads_without_a_token(tmp_path: Path) -> None:
    data = write_json(tmp_path / "data.json", [server_doc("com.acme/tool")])
    registry = _registry(
        {
            "sources": [{"name": "local", "file": {"path": str(data)}}],
            "registries": [{"name": "default", "sources": ["local"]}],
            "auth": {"mode": "anonymous"},
        }
    )
    plan = mcpregistry.plan(registry, World(platform="local", namespace="team"))
    config = parse_config(yaml.safe_load(plan.config_files[0].content))
    async with running(config, tmp_path) as h:
        await h.sync()
        answer = await h.get("/registry/default/v0.1/servers")
        assert [s["server"]["name"] for s in answer.json()["servers"]] == ["com.acme/tool"]
