"""Every ToolHive example document of the seven added kinds passes `kubectl apply --validate=strict
--dry-run=server` against our CRDs on the dev cluster, and parses into our models the same way."""

from __future__ import annotations

import pytest
import yaml

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.devcluster.handle import ClusterHandle
from tests.newkinds.examples import NEW_KINDS, ExampleDocument, new_kind_documents

DOCUMENTS = new_kind_documents()


def test_every_new_kind_has_an_example_or_is_known_to_have_none() -> None:
    seen = {d.document["kind"] for d in DOCUMENTS}
    # ToolHive ships no example of these two kinds; their models are covered by tests/newkinds/test_models.py.
    assert seen == set(NEW_KINDS) - {"MCPAuthzConfig", "MCPWebhookConfig"}


@pytest.mark.parametrize("example", DOCUMENTS, ids=lambda e: e.id)
def test_example_parses_locally(example: ExampleDocument) -> None:
    model = parse_manifest(example.document)
    assert model.kind == example.document["kind"]


@pytest.mark.parametrize("example", DOCUMENTS, ids=lambda e: e.id)
def test_example_is_accepted_by_the_api_server(
    example: ExampleDocument, dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    document = dict(example.document)
    document["metadata"] = {**document["metadata"], "namespace": namespace}
    result = dev_cluster.kubectl(
        "apply",
        "--validate=strict",
        "--dry-run=server",
        "-f",
        "-",
        input=yaml.safe_dump(document),
        check=False,
    )
    assert result.returncode == 0, result.stderr
