"""The EmbeddingServer kind with `image: mcpfleet://embeddings`: planned as `mcpfleet embeddings serve` on
both platforms, rendered on Kubernetes in the mcpfleet image with a /health readiness probe and no
model cache; a bundled model named in `spec.model` is passed on, TEI's default id is not."""

from __future__ import annotations

from typing import Any

from mcpfleet.api.embeddingserver import BUILTIN_IMAGE, EmbeddingServer
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import embeddingserver
from mcpfleet.reconcile.model import Images, World


def _server(**spec: Any) -> EmbeddingServer:
    return EmbeddingServer.model_validate(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "EmbeddingServer",
            "metadata": {"name": "emb", "namespace": "team"},
            "spec": {"image": BUILTIN_IMAGE, **spec},
        }
    )


def test_planned_as_mcpfleet_embeddings_serve_on_both_platforms() -> None:
    for platform in ("local", "kubernetes"):
        plan = embeddingserver.plan(_server(port=9000), World(platform=platform, namespace="team"))
        assert not plan.problems, plan.problems
        (container,) = plan.containers
        assert container.command == ("mcpfleet", "embeddings", "serve", "--host", "0.0.0.0", "--port", "9000")
        assert container.image is None and container.fixed_port and plan.health_path == "/health"
        assert plan.data_dir is None and plan.volume_claim is None
    named = embeddingserver.plan(_server(model="wordllama"), World(platform="local", namespace="team"))
    assert named.containers[0].command[-2:] == ("--model", "wordllama")


def test_rendered_in_the_mcpfleet_image() -> None:
    plan = embeddingserver.plan(
        _server(modelCache={"enabled": True}), World(platform="kubernetes", namespace="team")
    )
    images = Images(runner="registry.example/mcpfleet:1.2")
    manifests = {m["kind"]: m for m in render(plan, Owner("EmbeddingServer", "emb", "team", "uid"), images)}
    assert set(manifests) == {"Deployment", "Service"}  # nothing to cache: the model is in the image
    (container,) = manifests["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/mcpfleet:1.2"
    assert container["command"][:3] == ["mcpfleet", "embeddings", "serve"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert manifests["Service"]["spec"]["ports"][0]["port"] == 8080
