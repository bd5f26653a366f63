"""Schemathesis against the server's own /openapi.json, in-process (ASGI): no 5xx, responses conform.

Data: the real ToolHive file plus entries with several versions, so generated names sometimes hit.
At least 1,000 generated cases run in total (checked by the last test of this module).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from mcpfleet.registry.app import RegistryApp
from tests.reference import OPENAPI_FILE, TOOLHIVE_FILE
from tests.registry.conftest import make_config, running, server_doc, write_json

MIN_CASES = 1000


@pytest.fixture(scope="module")
async def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RegistryApp]:
    tmp = tmp_path_factory.mktemp("fuzz")
    write_json(tmp / "extra.json", [server_doc("com.example/a", v) for v in ("1.0.0", "2.0.0", "0.1.0-rc.1")])
    cfg = make_config(
        [
            {"name": "toolhive", "format": "toolhive", "file": {"path": str(TOOLHIVE_FILE)}},
            {"name": "extra", "file": {"path": "extra.json"}},
        ],
        f"sqlite+aiosqlite:///{tmp / 'fuzz.db'}",
    )
    async with running(cfg, tmp) as h:
        await h.sync()
        yield h.app
    await asyncio.sleep(0)


def test_api_fuzz(fuzz_app: RegistryApp) -> None:
    # Driven through hypothesis directly: schemathesis' pytest plugin does not load on this pytest.
    from hypothesis import given

    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    failures: list[str] = []
    cases = 0
    plan = [(r.ok(), mode) for r in schema.get_all_operations() for mode in GenerationMode]
    for operation, mode in plan:
        if mode == GenerationMode.NEGATIVE and not operation.query and not operation.path_parameters:
            continue  # nothing to make invalid
        examples = 110 if mode == GenerationMode.POSITIVE else 60

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def run(case: Any) -> None:
            nonlocal cases
            cases += 1
            response = case.call()
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} -> {response.status_code}"
            )
            # positive_data_acceptance is left out on purpose: a schema-valid server.json body can still
            # break a publish rule beyond the schema (http URLs, no $schema: a documented 422), and a
            # made-up updated_since that is schema-valid may still be refused (400, documented).
            case.validate_response(response, excluded_checks=[positive_data_acceptance])

        try:
            run()
        except Exception as exc:  # collect per operation, report all at the end
            failures.append(f"{operation.label}: {exc}"[:2000])
    assert not failures, "\n\n".join(failures)
    assert cases >= MIN_CASES, f"only {cases} schemathesis cases ran"


def test_own_openapi_reuses_upstream_schemas(tmp_path: Path) -> None:
    import yaml

    from mcpfleet.registry.openapi import build_openapi

    upstream = yaml.safe_load(OPENAPI_FILE.read_text())
    own = build_openapi()
    assert own["components"]["schemas"] == upstream["components"]["schemas"]
    for path in (
        "/v0.1/servers",
        "/v0.1/servers/{serverName}/versions",
        "/v0.1/servers/{serverName}/versions/{version}",
    ):
        assert (
            own["paths"][path]["get"]["responses"]["200"]["content"]
            == upstream["paths"][path]["get"]["responses"]["200"]["content"]
        )
